"""The real library: validates clean, and every SKILL.md passes the Agent Skills reference validator."""

from __future__ import annotations

from pathlib import Path

import pytest
from skills_ref.validator import validate as skills_ref_validate

from skillkb.api import validate
from skillkb.cli import main

from conftest import REPO_ROOT

SKILL_DIRS = sorted(p.parent for top in ("hardware", "repositories") for p in (REPO_ROOT / top).rglob("SKILL.md"))


def test_library_validates_clean() -> None:
    errors = [d.render() for d in validate(REPO_ROOT) if d.severity == "error"]
    assert errors == []


def test_library_has_entries_in_every_tier() -> None:
    assert SKILL_DIRS
    assert main(["--root", str(REPO_ROOT), "validate"]) == 0


@pytest.mark.parametrize("folder", SKILL_DIRS, ids=[p.relative_to(REPO_ROOT).as_posix() for p in SKILL_DIRS])
def test_skills_ref_accepts(folder: Path) -> None:
    assert skills_ref_validate(folder) == []


def test_skills_ref_rejects_what_we_reject(tmp_path: Path) -> None:
    folder = tmp_path / "bad-skill"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: Bad-Skill\ndescription: x\ntier: 2\n---\nbody\n")
    assert skills_ref_validate(folder)
