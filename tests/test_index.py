"""skill-index.json: deterministic, atomic, schema-valid, and drift-checked by entry."""

from __future__ import annotations

import json
from pathlib import Path

from skillkb.api import load_or_fail
from skillkb.cli import main
from skillkb.fsutil import folder_digest
from skillkb.index import build_index, index_drift, render_index, write_index

from conftest import REPO_ROOT


def test_build_twice_is_byte_identical(library_root: Path) -> None:
    library = load_or_fail(library_root)
    assert write_index(library) is True
    first = (library_root / "skill-index.json").read_bytes()
    assert write_index(load_or_fail(library_root)) is False
    assert (library_root / "skill-index.json").read_bytes() == first
    assert first.endswith(b"}\n")
    assert not [p for p in library_root.iterdir() if p.name.endswith(".tmp")]


def test_index_records(library_root: Path) -> None:
    index = build_index(load_or_fail(library_root))
    assert [e.id for e in index.entries] == sorted(e.id for e in index.entries)
    entry = next(e for e in index.entries if e.id == "hardware/ascend/demo-feature")
    assert entry.name == "demo-feature" and entry.tier == 2 and entry.status == "candidate"
    assert entry.readsets[0].evidence == "verified"
    assert entry.digest == folder_digest(library_root / entry.id)


def test_check_names_the_changed_entry(library_root: Path, capsys) -> None:
    write_index(load_or_fail(library_root))
    assert main(["--root", str(library_root), "index", "--check"]) == 0
    skill = library_root / "hardware/ascend/demo-feature/SKILL.md"
    skill.write_text(skill.read_text() + "\nMore.\n")
    assert index_drift(load_or_fail(library_root)) == ["hardware/ascend/demo-feature"]
    assert main(["--root", str(library_root), "index", "--check"]) == 1
    assert "hardware/ascend/demo-feature" in capsys.readouterr().err


def test_index_refuses_a_broken_library(library_root: Path) -> None:
    (library_root / "hardware/ascend/demo-feature/entry.yaml").write_text("tier: [\n")
    assert main(["--root", str(library_root), "index"]) == 1
    assert not (library_root / "skill-index.json").exists()


def test_digest_feeds_path_then_bytes(tmp_path: Path) -> None:
    import hashlib

    (tmp_path / "b.md").write_bytes(b"B")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.md").write_bytes(b"X")
    expected = hashlib.sha256(b"a/x.md" + b"X" + b"b.md" + b"B").hexdigest()
    assert folder_digest(tmp_path) == f"sha256:{expected}"


def test_committed_index_is_current() -> None:
    library = load_or_fail(REPO_ROOT)
    assert index_drift(library) == []
    assert (REPO_ROOT / "skill-index.json").read_bytes() == render_index(build_index(library))
    assert json.loads((REPO_ROOT / "skill-index.json").read_text())["entries"]
