"""Manifests: the snapshot command's output format, and agreement with the shared reference manifests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skillkb.cli import main
from skillkb.manifests import count_lines, load_manifests, snapshot_rows

from conftest import REPO_ROOT, SHARED, git

PINNED = [
    "vllm-project__vllm-ascend@9bf964cb4b87c8cd0d6852c41a55b3c29711fa95.tsv",
    "vllm-project__vllm-ascend@182b75ea84ff13ece27b57391331ef8935410aea.tsv",
    "Ascend__pytorch@8751b36d5d6959e499e6bf6530c1928060ced030.tsv",
]


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    repo = tmp_path / "up"
    repo.mkdir()
    git(repo, "init", "-q")
    files = {
        "b.txt": b"one\ntwo",
        "a/z.py": b"x = 1\n",
        "a/empty": b"",
        "A.md": b"caps\n\n",
        "bin.dat": b"\x00\x01\n\x02",
    }
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    (repo / "link").symlink_to("b.txt")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c1")
    git(repo, "tag", "v1")
    return repo


def test_count_lines() -> None:
    assert [count_lines(b) for b in (b"", b"a", b"a\n", b"a\nb", b"\n\n")] == [0, 1, 1, 2, 2]


def test_snapshot_rows_match_git(upstream: Path) -> None:
    commit, rows = snapshot_rows(upstream, "v1")
    assert commit == git(upstream, "rev-parse", "HEAD").strip()
    by_path = {r.path: r for r in rows}
    assert [r.path for r in rows] == sorted(by_path, key=lambda p: p.encode())  # byte order: "A.md" before "a/..."
    assert by_path["b.txt"].lines == 2 and by_path["b.txt"].bytes == 7
    assert by_path["a/empty"].lines == 0
    assert by_path["link"].bytes == len("b.txt")  # a symlink's blob is its target path
    for row in rows:
        assert row.blob == git(upstream, "rev-parse", f"{commit}:{row.path}").strip()


def snapshot_argv(clone: Path, commit: str, out: Path) -> list[str]:
    root = ["--root", str(REPO_ROOT)]
    return [
        *root,
        "readsets",
        "snapshot",
        "--clone",
        str(clone),
        "--repo",
        "acme/up",
        "--commit",
        commit,
        "--out",
        str(out),
    ]


def test_snapshot_command_is_deterministic(upstream: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = snapshot_argv(upstream, "v1", out)
    assert main(args) == 0
    (first,) = out.iterdir()
    data = first.read_bytes()
    assert main(args) == 0
    assert first.read_bytes() == data
    assert first.name.startswith("acme__up@") and data.startswith(b"path\tblob\tbytes\tlines\n")


def test_unknown_commit_is_a_clear_error(upstream: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(snapshot_argv(upstream, "nope", tmp_path))
    assert code == 1
    assert "git:" in capsys.readouterr().err


COMMITTED = sorted((REPO_ROOT / "sources" / "manifests").glob("*.tsv"))
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


@pytest.mark.parametrize("path", COMMITTED, ids=[p.name for p in COMMITTED])
def test_committed_manifest_is_internally_consistent(path: Path) -> None:
    """What a manifest must be whoever made it: the header, unique paths in byte order, 40-hex blobs,
    sizes that agree with each other (an empty file has 0 lines and git's empty blob)."""
    lines = path.read_bytes().decode("utf-8", "surrogateescape").split("\n")
    assert lines[0] == "path\tblob\tbytes\tlines" and lines[-1] == ""
    rows = [line.split("\t") for line in lines[1:-1]]
    assert rows and all(len(r) == 4 for r in rows)
    paths = [r[0] for r in rows]
    assert paths == sorted(paths, key=lambda p: p.encode("utf-8", "surrogateescape")) and len(set(paths)) == len(paths)
    for path_, blob, size, count in rows:
        assert len(blob) == 40 and all(c in "0123456789abcdef" for c in blob), path_
        assert int(count) <= int(size), path_
        assert (int(size) == 0) == (blob == EMPTY_BLOB) == (int(count) == 0), path_
    if path.name.endswith(".artifact.tsv"):
        info = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        assert info["commit"] == path.name.split("@")[1].removesuffix(".artifact.tsv")
        assert len(info["sha256"]) == 64 and info["artifact"]


@pytest.mark.parametrize("name", PINNED)
def test_committed_manifest_equals_shared_reference(name: str) -> None:
    """Runs where the shared reference listings sit beside the checkout (our machines and CI)."""
    reference = SHARED / "upstream" / name
    if not reference.is_file():
        pytest.skip(f"no shared reference at {reference}: only the integrity checks above apply in a bare clone")
    assert (REPO_ROOT / "sources" / "manifests" / name).read_bytes() == reference.read_bytes()


def test_committed_manifests_load_cleanly() -> None:
    store, problems = load_manifests(REPO_ROOT)
    assert problems == []
    assert len(store.manifests) >= 3


MIRRORS = {
    "vllm-project__vllm-ascend": os.environ.get("SKILLKB_MIRROR_VLLM_ASCEND"),
    "Ascend__pytorch": os.environ.get("SKILLKB_MIRROR_TORCH_NPU"),
}


@pytest.mark.parametrize("name", PINNED)
def test_snapshot_of_real_clone_equals_committed(name: str) -> None:
    """Runs where a clone of the upstream repository is available (set SKILLKB_MIRROR_*)."""
    clone = MIRRORS[name.split("@")[0]]
    if not clone:
        pytest.skip("no upstream clone here: set SKILLKB_MIRROR_VLLM_ASCEND / SKILLKB_MIRROR_TORCH_NPU")
    commit = name.split("@")[1].removesuffix(".tsv")
    from skillkb.manifests import render_manifest

    _, rows = snapshot_rows(Path(clone), commit)
    assert render_manifest(rows) == (REPO_ROOT / "sources" / "manifests" / name).read_bytes()
