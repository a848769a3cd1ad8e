#!/usr/bin/env bash
# Set up .venv with the skillkb package.
#   bash scripts/setup.sh          the library, validation and BM25 search
#   bash scripts/setup.sh --all    everything: dense retrieval, docs site, MCP server, test tools,
#                                  and (as root, when missing) Debian's chromium + fonts for the browser test
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/pip install --quiet --disable-pip-version-check)
if [ "${1:-}" = "--all" ]; then
  # The CPU wheel first: otherwise sentence-transformers would pull torch with several GB of CUDA wheels.
  "${pip[@]}" "torch==2.13.0"
  "${pip[@]}" -e ".[test]"
  if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi "wenquanyi"; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-wqy-microhei >/dev/null
    else
      echo "setup: the browser test needs Debian's chromium, chromium-driver and fonts-wqy-microhei (run as root)" >&2
      exit 1
    fi
  fi
else
  "${pip[@]}" -e .
fi
