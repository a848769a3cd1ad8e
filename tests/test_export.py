"""``skillkb export``: Agent Skills folders that validate, idempotent writes, drift checks, links, filters."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from skills_ref.prompt import to_prompt
from skills_ref.validator import validate

from skillkb.api import load_or_fail
from skillkb.cli import main
from skillkb.export import CATALOG_FILE, LOCK_FILE, check, export
from skillkb.fsutil import folder_digest

from conftest import DEMO_COMMIT, DEMO_REPO, REPO_ROOT

FEATURE = "hardware/ascend/demo-feature"
NAMES = ["demo-constraint", "demo-feature", "demo-mechanism"]
REFERENCE = (
    "# Notes\n\nSize the pool [widget@0123456:src/pool.py#L3-L9]; one line [widget@0123456:src/pool.py#L4].\n\n"
    "Written as code it stays: `[widget@0123456:src/pool.py#L3-L9]`.\n\n"
    "```text\n[widget@0123456:src/pool.py#L3-L9]\n```\n"
)


@pytest.fixture
def lib(library_root: Path) -> Path:
    refs = library_root / FEATURE / "references"
    refs.mkdir()
    (refs / "notes.md").write_text(REFERENCE, encoding="utf-8")
    return library_root


def catalog_items(xml: str) -> list[tuple[str, str, str]]:
    tags = r"<name>\s*(.*?)\s*</name>\s*<description>\s*(.*?)\s*</description>\s*<location>\s*(.*?)\s*</location>"
    return re.findall(tags, xml, re.S)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_exported_folder_of_the_real_library_validates(tmp_path: Path) -> None:
    library = load_or_fail(REPO_ROOT)
    target = tmp_path / "skills"
    report = export(library, target)
    names = sorted(e.name for e in library.entries.values() if e.meta is not None)
    assert sorted(report.written) == names
    for name in names:
        assert validate(target / name) == [], name
        assert (target / name / "SKILL.md").is_file()
        assert "@9bf964c:" not in (target / name / "SKILL.md").read_text(encoding="utf-8")
    lock = json.loads((target / LOCK_FILE).read_text(encoding="utf-8"))
    assert {n: r["digest"] for n, r in lock["skills"].items()} == {n: folder_digest(target / n) for n in names}
    assert check(library, target) == []


def test_the_agentskills_cli_accepts_an_exported_folder(lib: Path, tmp_path: Path) -> None:
    cli = Path(sys.executable).parent / "agentskills"
    if not cli.exists():
        cli = Path(sys.executable).parent / "skills-ref"
    assert cli.exists(), "skills-ref==0.1.1 (test extra) installs the agentskills CLI next to python"
    export(load_or_fail(lib), tmp_path / "skills")
    for name in NAMES:
        done = subprocess.run([str(cli), "validate", str(tmp_path / "skills" / name)], capture_output=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "skills" / "demo-feature" / "SKILL.md"
    broken.write_text(broken.read_text(encoding="utf-8").replace("name: demo-feature", "name: Wrong_Name"))
    done = subprocess.run([str(cli), "validate", str(broken.parent)], capture_output=True, timeout=60)
    assert done.returncode == 1


def test_layout_catalog_and_lock(lib: Path, tmp_path: Path) -> None:
    target = tmp_path / ".claude" / "skills"
    export(load_or_fail(lib), target)
    assert sorted(p.name for p in target.iterdir()) == sorted([*NAMES, CATALOG_FILE, LOCK_FILE])
    assert (target / "demo-feature" / "references" / "notes.md").is_file()
    catalog = (target / CATALOG_FILE).read_text(encoding="utf-8")
    # the same skills, descriptions and files skills-ref renders, with locations relative to the target
    reference = to_prompt([target / n for n in NAMES]).replace(f"{target.resolve()}/", "")
    assert catalog_items(catalog) == catalog_items(reference) and len(catalog_items(catalog)) == 3
    assert catalog.startswith("<available_skills>\n") and catalog.endswith("</available_skills>\n")
    for name in NAMES:
        assert f"<name>{name}</name>" in catalog and f"<location>{name}/SKILL.md</location>" in catalog
    lock = json.loads((target / LOCK_FILE).read_text(encoding="utf-8"))
    assert lock["skills"]["demo-feature"]["id"] == FEATURE
    files = lock["skills"]["demo-feature"]["files"]
    assert sorted(files) == ["SKILL.md", "references/notes.md"]
    for rel, digest in files.items():  # every file the export wrote, with the sha256 it wrote
        assert digest == "sha256:" + hashlib.sha256((target / "demo-feature" / rel).read_bytes()).hexdigest()
    assert lock["catalog"] == "sha256:" + hashlib.sha256((target / CATALOG_FILE).read_bytes()).hexdigest()


def test_citations_become_links_to_the_pinned_commit(lib: Path, tmp_path: Path) -> None:
    export(load_or_fail(lib), tmp_path / "skills")
    base = f"https://github.com/{DEMO_REPO}/blob/{DEMO_COMMIT}/src/pool.py"
    skill = (tmp_path / "skills" / "demo-feature" / "SKILL.md").read_text(encoding="utf-8")
    assert f"[pool.py#L1-L3]({base}#L1-L3)" in skill
    assert "[widget@" not in skill
    notes = (tmp_path / "skills" / "demo-feature" / "references" / "notes.md").read_text(encoding="utf-8")
    assert f"Size the pool [pool.py#L3-L9]({base}#L3-L9); one line [pool.py#L4]({base}#L4)." in notes
    # citations inside inline code and fenced blocks are quoted text, not facts: left alone
    assert "`[widget@0123456:src/pool.py#L3-L9]`" in notes
    assert "```text\n[widget@0123456:src/pool.py#L3-L9]\n```" in notes
    # the frontmatter is kept verbatim
    source = (lib / FEATURE / "SKILL.md").read_text(encoding="utf-8")
    assert skill.split("\n---\n", 1)[0] == source.split("\n---\n", 1)[0]


def test_rerunning_is_byte_identical(lib: Path, tmp_path: Path) -> None:
    target = tmp_path / "skills"
    library = load_or_fail(lib)
    first = export(library, target)
    before = snapshot(target)
    second = export(library, target)
    assert sorted(first.written) == NAMES and second.written == [] and sorted(second.unchanged) == NAMES
    assert snapshot(target) == before
    assert main(["--root", str(lib), "export", "--target", str(target)]) == 0
    assert snapshot(target) == before


def test_check_names_edited_missing_and_stray_folders(lib: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "skills"
    library = load_or_fail(lib)
    export(library, target)
    assert main(["--root", str(lib), "export", "--target", str(target), "--check"]) == 0
    edited = target / "demo-feature" / "references" / "notes.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "local edit\n", encoding="utf-8")
    shutil.rmtree(target / "demo-mechanism")
    (target / "my-own-skill").mkdir()
    capsys.readouterr()
    assert main(["--root", str(lib), "export", "--target", str(target), "--check"]) == 1
    err = capsys.readouterr().err
    assert "demo-feature: differs from hardware/ascend/demo-feature (changed references/notes.md)" in err
    assert "demo-mechanism: missing" in err
    assert "my-own-skill: stray folder (not created by skillkb export)" in err
    assert "demo-constraint" not in err
    # re-exporting refuses to overwrite the local edit; --force repairs it and leaves the foreign folder alone
    capsys.readouterr()
    assert main(["--root", str(lib), "export", "--target", str(target)]) == 2
    assert "changed since the last export or not written by it: demo-feature/references/notes.md" in (
        capsys.readouterr().err
    )
    assert edited.read_text(encoding="utf-8").endswith("local edit\n")
    export(library, target, force=True)
    assert check(library, target) == ["my-own-skill: stray folder (not created by skillkb export)"]
    assert (target / "my-own-skill").is_dir()


def test_filters_and_removal_of_deselected_folders(lib: Path, tmp_path: Path) -> None:
    target = tmp_path / "skills"
    library = load_or_fail(lib)
    export(library, target)
    (target / "keep-me").mkdir()
    report = export(library, target, tier=2)
    assert report.written + report.unchanged == ["demo-feature"]
    assert sorted(report.removed) == ["demo-constraint", "demo-mechanism"]
    assert sorted(p.name for p in target.iterdir() if p.is_dir()) == ["demo-feature", "keep-me"]
    lock = json.loads((target / LOCK_FILE).read_text(encoding="utf-8"))
    assert list(lock["skills"]) == ["demo-feature"] and lock["filters"] == {"status": None, "tier": 2}
    assert check(library, target, tier=2) == ["keep-me: stray folder (not created by skillkb export)"]
    assert export(library, tmp_path / "covered", status="covered").written == []  # every demo entry is a candidate
    assert sorted(export(library, tmp_path / "candidates", status="candidate").written) == NAMES


def test_refuses_targets_inside_the_library_and_foreign_folders(lib: Path, tmp_path: Path, capsys) -> None:
    for bad in (lib / FEATURE / "out", lib / "hardware" / "skills", lib / "repositories", lib, lib.parent):
        assert main(["--root", str(lib), "export", "--target", str(bad)]) == 2
        assert "--target" in capsys.readouterr().err
    assert not (lib / FEATURE / "out").exists() and not (lib / "hardware" / "skills").exists()
    for inside in (lib / ".agents" / "skills", lib / "schemas" / "x", lib / ".git" / "hooks", lib / "tools"):
        assert main(["--root", str(lib), "export", "--target", str(inside)]) == 2
        assert "inside the library" in capsys.readouterr().err
    assert not (lib / ".agents").exists()
    target = tmp_path / "skills"
    (target / "demo-feature").mkdir(parents=True)
    (target / "demo-feature" / "SKILL.md").write_text("mine\n")
    assert main(["--root", str(lib), "export", "--target", str(target)]) == 2
    assert "not created by skillkb export: demo-feature" in capsys.readouterr().err
    assert (target / "demo-feature" / "SKILL.md").read_text() == "mine\n"


def test_refuses_a_lock_that_points_outside(lib: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "skills"
    victim = tmp_path / "victim"
    victim.mkdir()
    target.mkdir()
    lock = {"generator": "skillkb export", "version": 1, "skills": {"../victim": {"digest": "x"}}}
    (target / LOCK_FILE).write_text(json.dumps(lock))
    assert main(["--root", str(lib), "export", "--target", str(target)]) == 2
    assert "names folders that are not skill names: ../victim" in capsys.readouterr().err
    assert victim.is_dir()
