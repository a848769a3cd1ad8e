"""Upstream manifests: the file listing of a repository at a commit (path, blob, bytes, lines).

``snapshot`` makes one from a git clone; ``ManifestStore`` loads the committed ones under
``sources/manifests/`` so readsets can be verified without network or clone.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import Diagnostic, GitError
from .models import ManifestRow

MANIFEST_DIR = Path("sources/manifests")
HEADER = "path\tblob\tbytes\tlines"
FILENAME = re.compile(
    r"^(?P<owner>[A-Za-z0-9-]+)__(?P<name>[A-Za-z0-9_.-]+)@(?P<commit>[0-9a-f]{40})(?P<partial>\.partial)?\.tsv$"
)


def manifest_filename(repo: str, commit: str, partial: bool = False) -> str:
    owner, name = repo.split("/", 1)
    return f"{owner}__{name}@{commit}{'.partial' if partial else ''}.tsv"


def count_lines(data: bytes) -> int:
    """Newline count, plus one for a last line without a newline (0 for an empty file)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# ------------------------------------------------------------------------------------------ snapshot


def _git(clone: Path, *args: str, data: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(clone), *args], input=data, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed") from exc
    if done.returncode != 0:
        raise GitError(done.stderr.decode("utf-8", "replace").strip() or f"git {args[0]} failed")
    return done.stdout


def resolve_commit(clone: Path, rev: str) -> str:
    return _git(clone, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()


def tree_blobs(clone: Path, commit: str) -> list[tuple[str, str]]:
    """(path, blob) for every blob in the commit's tree; submodule entries are not files and are skipped."""
    listing = _git(clone, "ls-tree", "-r", "-z", "--full-tree", commit)
    rows = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        _mode, kind, blob = meta.decode().split()
        if kind == "blob":
            rows.append((path.decode("utf-8", "surrogateescape"), blob))
    return rows


def blob_contents(clone: Path, blobs: list[str]) -> dict[str, bytes]:
    """Read many blobs through one ``git cat-file --batch`` process."""
    unique = sorted(set(blobs))
    out = _git(clone, "cat-file", "--batch", data="".join(f"{b}\n" for b in unique).encode())
    contents: dict[str, bytes] = {}
    pos = 0
    for _ in unique:
        newline = out.index(b"\n", pos)
        sha, _kind, size = out[pos:newline].decode().split()
        start = newline + 1
        contents[sha] = out[start : start + int(size)]
        pos = start + int(size) + 1
    return contents


def snapshot_rows(clone: Path, rev: str) -> tuple[str, list[ManifestRow]]:
    commit = resolve_commit(clone, rev)
    pairs = tree_blobs(clone, commit)
    contents = blob_contents(clone, [blob for _, blob in pairs])
    rows = [
        ManifestRow(path=path, blob=blob, bytes=len(contents[blob]), lines=count_lines(contents[blob]))
        for path, blob in pairs
    ]
    return commit, sorted(rows, key=lambda r: r.path.encode("utf-8", "surrogateescape"))


def render_manifest(rows: list[ManifestRow]) -> bytes:
    body = "".join(f"{r.path}\t{r.blob}\t{r.bytes}\t{r.lines}\n" for r in rows)
    return (HEADER + "\n" + body).encode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------------------------- store


@dataclass
class Manifest:
    repo: str
    commit: str
    partial: bool
    file: str
    rows: dict[str, ManifestRow] = field(default_factory=dict)


@dataclass
class ManifestStore:
    manifests: dict[tuple[str, str], Manifest] = field(default_factory=dict)

    def get(self, repo: str, commit: str) -> Manifest | None:
        return self.manifests.get((repo, commit))


def parse_manifest(path: Path, display: str) -> tuple[Manifest | None, list[Diagnostic]]:
    match = FILENAME.match(path.name)
    if not match:
        return None, [
            Diagnostic(
                display,
                None,
                "manifest-name",
                "",
                "manifest file name is not OWNER__NAME@COMMIT[.partial].tsv",
                "rename it, or write it with `skillkb readsets snapshot`",
            )
        ]
    manifest = Manifest(
        repo=f"{match['owner']}/{match['name']}", commit=match["commit"], partial=bool(match["partial"]), file=display
    )
    problems: list[Diagnostic] = []
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    lines = text.split("\n")
    if not lines or lines[0] != HEADER:
        problems.append(
            Diagnostic(
                display,
                1,
                "manifest-header",
                "",
                f"first line must be '{HEADER}' (tab-separated)",
                "regenerate the manifest with `skillkb readsets snapshot`",
            )
        )
        return manifest, problems
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        cells = line.split("\t")
        try:
            if len(cells) != 4:
                raise ValueError(f"expected 4 tab-separated cells, found {len(cells)}")
            row = ManifestRow(path=cells[0], blob=cells[1], bytes=int(cells[2]), lines=int(cells[3]))
        except ValueError as exc:
            problems.append(
                Diagnostic(
                    display,
                    number,
                    "manifest-row",
                    "",
                    f"bad manifest row: {exc}".splitlines()[0],
                    "regenerate the manifest with `skillkb readsets snapshot`",
                )
            )
            continue
        manifest.rows[row.path] = row
    return manifest, problems


def load_manifests(root: Path) -> tuple[ManifestStore, list[Diagnostic]]:
    store = ManifestStore()
    problems: list[Diagnostic] = []
    folder = root / MANIFEST_DIR
    if not folder.is_dir():
        return store, problems
    for path in sorted(folder.glob("*.tsv")):
        manifest, found = parse_manifest(path, path.relative_to(root).as_posix())
        problems.extend(found)
        if manifest is None:
            continue
        key = (manifest.repo, manifest.commit)
        if key in store.manifests:
            # A full manifest supersedes a partial one for the same commit.
            if store.manifests[key].partial and not manifest.partial:
                store.manifests[key] = manifest
            elif not manifest.partial:
                problems.append(
                    Diagnostic(
                        manifest.file,
                        None,
                        "manifest-duplicate",
                        "",
                        f"a second full manifest for {key[0]}@{key[1]}",
                        "keep one of them",
                    )
                )
            continue
        store.manifests[key] = manifest
    return store, problems
