"""Release-artifact manifests: every file of a published sdist, verifying readsets like a git tree does."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from skillkb.api import load_or_fail, validate
from skillkb.cli import main
from skillkb.manifests import MANIFEST_DIR, git_blob_sha
from skillkb.validate import missing_gates

from conftest import DEMO_COMMIT

MECHANISM = "repositories/vllm/demo-mechanism"
TAG_COMMIT = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"
POOL = b"".join(f"line {i}\n".encode() for i in range(1, 31))


def make_sdist(folder: Path, commit_id: str = "gabcdefabc") -> Path:
    """A small sdist: top folder, a generated _version.py naming the commit, and the file a readset cites."""
    path = folder / "widget-1.0.0.tar.gz"
    files = {
        "widget-1.0.0/src/pool.py": POOL,
        "widget-1.0.0/widget/_version.py": f"__commit_id__ = commit_id = '{commit_id}'\n".encode(),
        "widget-1.0.0/PKG-INFO": b"Name: widget\n",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def snapshot_args(root: Path, sdist: Path, commit: str = TAG_COMMIT) -> list[str]:
    return [
        "--root", str(root), "readsets", "snapshot", "--artifact", str(sdist),
        "--repo", "acme/widget", "--commit", commit, "--tag", "v1.0.0",
    ]  # fmt: skip


def pin_mechanism_to_artifact(root: Path) -> None:
    """Point the Tier 1 demo entry's readset at the artifact commit, with the artifact's blob."""
    meta = root / MECHANISM / "entry.yaml"
    blob = git_blob_sha(POOL)
    meta.write_text(
        meta.read_text().replace(DEMO_COMMIT, TAG_COMMIT).replace("2222222222222222222222222222222222222222", blob)
    )
    skill = root / MECHANISM / "SKILL.md"
    skill.write_text(skill.read_text().replace("widget@0123456", f"widget@{TAG_COMMIT[:7]}"))


def test_snapshot_artifact_lists_every_file(library_root: Path, tmp_path: Path) -> None:
    sdist = make_sdist(tmp_path)
    assert main(snapshot_args(library_root, sdist)) == 0
    tsv = library_root / MANIFEST_DIR / f"acme__widget@{TAG_COMMIT}.artifact.tsv"
    rows = tsv.read_text().splitlines()
    assert rows[0] == "path\tblob\tbytes\tlines"
    assert [r.split("\t")[0] for r in rows[1:]] == ["PKG-INFO", "src/pool.py", "widget/_version.py"]
    assert f"src/pool.py\t{git_blob_sha(POOL)}\t{len(POOL)}\t30" in rows
    info = json.loads(tsv.with_suffix(".json").read_text())
    assert info["artifact"] == "widget-1.0.0.tar.gz" and info["commit_named_by_artifact"] == "gabcdefabc"
    assert len(info["sha256"]) == 64 and info["tag"] == "v1.0.0"


def test_blob_matches_git_hash_object(tmp_path: Path) -> None:
    sample = tmp_path / "f"
    sample.write_bytes(POOL)
    out = subprocess.run(["git", "hash-object", str(sample)], capture_output=True, text=True, check=True).stdout
    assert git_blob_sha(POOL) == out.strip()


def test_artifact_evidence_meets_the_covered_gate(library_root: Path, tmp_path: Path) -> None:
    assert main(snapshot_args(library_root, make_sdist(tmp_path))) == 0
    pin_mechanism_to_artifact(library_root)
    library = load_or_fail(library_root)
    missing = missing_gates(library.entries[MECHANISM], library, "covered")
    assert not any("readset file" in gap for gap in missing)
    # The tier rules decide: without `artifact` in the accepted evidence the same files do not count.
    rules = library_root / "schemas" / "tier-rules.yaml"
    rules.write_text(rules.read_text().replace("evidence: [verified, artifact]", "evidence: [verified]"))
    library = load_or_fail(library_root)
    missing = missing_gates(library.entries[MECHANISM], library, "covered")
    assert any("release-artifact manifests are not accepted" in gap for gap in missing)


def test_verify_against_the_artifact(library_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sdist = make_sdist(tmp_path)
    assert main(snapshot_args(library_root, sdist)) == 0
    pin_mechanism_to_artifact(library_root)
    verify = ["--root", str(library_root), "readsets", "verify", "--artifact", f"acme/widget={sdist}"]
    assert main(verify) == 0
    (tmp_path / "other").mkdir()
    other = make_sdist(tmp_path / "other")
    other.write_bytes(other.read_bytes() + b"\0")  # not the archive the manifest records: another sha256
    assert main(["--root", str(library_root), "readsets", "verify", "--artifact", f"acme/widget={other}"]) == 1
    assert "matches no release-artifact manifest" in capsys.readouterr().err


def test_commit_must_extend_the_one_the_artifact_names(library_root: Path, tmp_path: Path, capsys) -> None:
    sdist = make_sdist(tmp_path, commit_id="g1234567")
    assert main(snapshot_args(library_root, sdist)) == 1
    assert "names commit g1234567" in capsys.readouterr().err


def test_missing_sidecar_is_a_diagnostic(library_root: Path, tmp_path: Path) -> None:
    assert main(snapshot_args(library_root, make_sdist(tmp_path))) == 0
    (library_root / MANIFEST_DIR / f"acme__widget@{TAG_COMMIT}.artifact.json").unlink()
    codes = {d.code for d in validate(library_root)}
    assert "manifest-artifact" in codes
