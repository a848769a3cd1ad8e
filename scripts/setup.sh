#!/usr/bin/env bash
# Set up .venv with the skillkb package.
#   bash scripts/setup.sh          the library, validation and BM25 search
#   bash scripts/setup.sh --all    everything: dense retrieval, docs site, MCP server, test tools,
#                                  and (as root, when missing) Debian's chromium + fonts for the browser test
#   bash scripts/setup.sh --browser-only   only the browser step
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's chromium, its driver and a CJK font, for tests/test_browser.py only: `docs serve` and every
# other command work without them, so a non-root user gets a warning, not a failure.
ensure_browser() {
  if command -v chromium >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi "wenquanyi"; then
    return 0
  fi
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-wqy-microhei >/dev/null
  else
    echo "setup: warning: Debian's chromium, chromium-driver and fonts-wqy-microhei are missing; only the" \
      "browser test (tests/test_browser.py) needs them: install them as root (apt-get install ...)" >&2
  fi
}

if [ "${1:-}" = "--browser-only" ]; then
  ensure_browser
  exit 0
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/pip install --quiet --disable-pip-version-check)
if [ "${1:-}" = "--all" ]; then
  # The CPU wheel first: otherwise sentence-transformers would pull torch with several GB of CUDA wheels.
  "${pip[@]}" "torch==2.13.0"
  "${pip[@]}" -e ".[test]"
  ensure_browser
else
  "${pip[@]}" -e .
fi
