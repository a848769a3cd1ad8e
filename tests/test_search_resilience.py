"""Search keeps serving when the files that tune it are broken: a malformed, empty or non-regular
calibration.json or retrieval-scope.yaml gives a diagnostic in ``library_problems`` (and on stderr), the
default weights and no abstention, never a traceback and never a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillkb.retrieval import CALIBRATION_FILE, Calibration
from skillkb.signals import LEXICON_FILE, Lexicon

from conftest import REPO_ROOT

BROKEN = {
    "not-json": "{ this is not json",
    "wrong-shape": '{"models": [1, 2, 3]}',
    "deep": "[" * 100_000 + "]" * 100_000,
    "empty": "",
}


def run_search(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "skillkb.cli", "--root", str(root), "search", "scheduler stalls", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # a FIFO that blocked the reader would hang here
    )


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_calibration_file_is_a_diagnostic(tmp_path: Path, kind: str) -> None:
    path = tmp_path / CALIBRATION_FILE
    path.parent.mkdir(parents=True)
    path.write_text(BROKEN[kind])
    calibration, problems = Calibration.load(tmp_path)
    assert calibration.models == {} and problems
    assert problems[0].file == CALIBRATION_FILE.as_posix() and problems[0].fix


@pytest.mark.parametrize(
    "text", ["domain_terms: [unclosed", "- just\n- a list\n", "bridges: {a: 3}\n", "x: &a [1]\ny: *a\n"]
)
def test_a_broken_scope_file_is_a_diagnostic(tmp_path: Path, text: str) -> None:
    path = tmp_path / LEXICON_FILE
    path.parent.mkdir(parents=True)
    path.write_text(text)
    lexicon, problems = Lexicon.load(tmp_path)
    assert lexicon == Lexicon() and problems and problems[0].file == LEXICON_FILE.as_posix()


def test_the_committed_files_load_clean() -> None:
    assert Calibration.load(REPO_ROOT)[1] == [] and Lexicon.load(REPO_ROOT)[1] == []


@pytest.mark.parametrize("which", [CALIBRATION_FILE, LEXICON_FILE])
@pytest.mark.parametrize("how", ["garbage", "fifo"])
def test_search_serves_with_a_broken_tuning_file(library_root: Path, which: Path, how: str) -> None:
    target = library_root / which
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    if how == "fifo":
        os.mkfifo(target)
    else:
        target.write_text("{[ not valid in any format")
    result = run_search(library_root)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["results"] and "Traceback" not in result.stderr
    assert any(which.as_posix() in p for p in payload["library_problems"])


def test_validate_reports_a_broken_tuning_file(library_root: Path) -> None:
    from skillkb.validate import check_tuning_files

    assert check_tuning_files(library_root) == []
    (library_root / CALIBRATION_FILE).parent.mkdir(parents=True, exist_ok=True)
    (library_root / CALIBRATION_FILE).write_text("not json")
    assert [d.code for d in check_tuning_files(library_root)] == ["calibration-invalid"]
