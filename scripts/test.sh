#!/usr/bin/env bash
# Set up everything, then run every check CI runs: lint, schemas, validation, index and coverage drift,
# the retrieval regression gate, the strict site build and the whole test suite (browser test included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --all
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NO_MKDOCS_2_WARNING=1
kb=.venv/bin/skillkb
echo "== ruff";                .venv/bin/ruff check tools tests bench
echo "== schemas --check";     $kb schemas --check
echo "== validate";            $kb validate
echo "== index --check";       $kb index --check
echo "== coverage --check";    $kb coverage --check
echo "== readsets verify";     $kb readsets verify
echo "== eval --gate";         $kb eval --gate evals/retrieval/baseline.json > /dev/null
echo "== eval --set real --gate"; $kb eval --set real --gate evals/retrieval/real/baseline.json > /dev/null
echo "== docs build --strict"; $kb docs build --strict --site-dir "$(mktemp -d)"
echo "== pytest";              .venv/bin/python -m pytest -q
