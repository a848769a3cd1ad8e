#!/usr/bin/env bash
# Set up, then run every check CI runs: lint, schemas, validation, index drift, the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --all
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NO_MKDOCS_2_WARNING=1
kb=.venv/bin/skillkb
echo "== ruff";            .venv/bin/ruff check tools tests
echo "== schemas";         $kb schemas --check
echo "== validate";        $kb validate
echo "== index --check";   $kb index --check
echo "== readsets verify"; $kb readsets verify
echo "== pytest";          .venv/bin/python -m pytest -q
