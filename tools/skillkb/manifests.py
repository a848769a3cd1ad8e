"""Upstream manifests: the file listing of a repository at a commit (path, blob, bytes, lines).

Three kinds, told apart by the file name:

- ``OWNER__NAME@COMMIT.tsv``: the whole git tree at the commit, made by ``snapshot`` from a clone;
- ``OWNER__NAME@COMMIT.artifact.tsv``: every file of a published release artifact (an sdist or wheel),
  made by ``snapshot_artifact``; the sidecar ``.artifact.json`` names the artifact, its sha256 and the
  commit the artifact itself names. It is a full listing of what the artifact holds, so it verifies
  readsets as well as a tree does, for the files the artifact contains;
- ``OWNER__NAME@COMMIT.partial.tsv``: single files read from stored copies; never enough to verify.

``ManifestStore`` loads the committed ones under ``sources/manifests/`` so readsets can be verified
without network or clone.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import Diagnostic, GitError
from .models import ManifestRow

MANIFEST_DIR = Path("sources/manifests")
HEADER = "path\tblob\tbytes\tlines"
FILENAME = re.compile(
    r"^(?P<owner>[A-Za-z0-9-]+)__(?P<name>[A-Za-z0-9_.-]+)@(?P<commit>[0-9a-f]{40})"
    r"(?:\.(?P<kind>partial|artifact))?\.tsv$"
)
GIT, PARTIAL, ARTIFACT = "git", "partial", "artifact"
ARTIFACT_FIELDS = ("repo", "commit", "tag", "version", "artifact", "sha256", "url", "commit_named_by_artifact", "note")


def manifest_filename(repo: str, commit: str, kind: str = GIT) -> str:
    owner, name = repo.split("/", 1)
    suffix = "" if kind == GIT else f".{kind}"
    return f"{owner}__{name}@{commit}{suffix}.tsv"


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


def git_blob_sha(data: bytes) -> str:
    """The SHA git gives these bytes as a blob (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def artifact_files(artifact: Path) -> dict[str, bytes]:
    """Regular files of an sdist (``.tar.gz``) or wheel (``.whl``), by path; an sdist's top folder is cut."""
    files: dict[str, bytes] = {}
    name = artifact.name
    if name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(artifact, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    handle = tar.extractfile(member)
                    if handle is not None:
                        files[member.name] = handle.read()
        tops = {p.split("/", 1)[0] for p in files}
        if len(tops) == 1 and all("/" in p for p in files):
            files = {p.split("/", 1)[1]: data for p, data in files.items()}
    elif name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(artifact) as archive:
            for info in archive.infolist():
                if not info.is_dir():
                    files[info.filename] = archive.read(info)
    else:
        raise GitError(f"{artifact}: not an sdist (.tar.gz) or wheel (.whl)")
    return files


def artifact_rows(artifact: Path) -> list[ManifestRow]:
    """One manifest row per regular file of the artifact, sorted by path bytes like ``snapshot_rows``."""
    rows = [
        ManifestRow(path=path, blob=git_blob_sha(data), bytes=len(data), lines=count_lines(data))
        for path, data in artifact_files(artifact).items()
    ]
    return sorted(rows, key=lambda r: r.path.encode("utf-8", "surrogateescape"))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def render_artifact_info(info: dict[str, str | None]) -> bytes:
    return (json.dumps({k: info.get(k) for k in ARTIFACT_FIELDS}, indent=2, ensure_ascii=False) + "\n").encode()


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
    artifact: dict | None = None  # the sidecar of a release-artifact manifest

    @property
    def kind(self) -> str:
        return PARTIAL if self.partial else ARTIFACT if self.artifact is not None else GIT


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
                "manifest file name is not OWNER__NAME@COMMIT[.partial|.artifact].tsv",
                "rename it, or write it with `skillkb readsets snapshot`",
            )
        ]
    manifest = Manifest(
        repo=f"{match['owner']}/{match['name']}",
        commit=match["commit"],
        partial=match["kind"] == PARTIAL,
        file=display,
    )
    problems: list[Diagnostic] = []
    if match["kind"] == ARTIFACT:
        manifest.artifact, found = _artifact_info(path.with_suffix(".json"), display, manifest)
        problems += found
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


def _artifact_info(path: Path, display: str, manifest: Manifest) -> tuple[dict, list[Diagnostic]]:
    """The sidecar of a release-artifact manifest: what artifact it lists, and which commit that names."""
    shown = display.removesuffix(".tsv") + ".json"

    def problem(message: str, fix: str) -> tuple[dict, list[Diagnostic]]:
        return {}, [Diagnostic(shown, None, "manifest-artifact", "", message, fix)]

    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return problem("a release-artifact manifest needs its sidecar .artifact.json", "run `snapshot --artifact`")
    except (OSError, ValueError) as exc:
        return problem(f"sidecar is not JSON: {exc}", "regenerate it with `skillkb readsets snapshot --artifact`")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("artifact", "sha256", "repo")):
        return problem("sidecar lacks 'artifact', 'sha256' or 'repo'", "regenerate it with `snapshot --artifact`")
    if info.get("repo") != manifest.repo or info.get("commit") != manifest.commit:
        return problem(
            f"sidecar names {info.get('repo')}@{info.get('commit')}, the file name {manifest.repo}@{manifest.commit}",
            "regenerate both with `skillkb readsets snapshot --artifact`",
        )
    named = str(info.get("commit_named_by_artifact") or "").removeprefix("g")
    if named and not manifest.commit.startswith(named):
        return problem(
            f"the artifact names commit {named}, which {manifest.commit} does not extend",
            "pin the commit the artifact itself names",
        )
    return info, []


def load_manifests(root: Path) -> tuple[ManifestStore, list[Diagnostic]]:
    store = ManifestStore()
    problems: list[Diagnostic] = []
    folder = root / MANIFEST_DIR
    if not folder.is_dir():
        return store, problems
    for path in sorted(folder.glob("*.tsv")):
        if path.is_symlink() or not path.is_file():
            problems.append(
                Diagnostic(
                    path.relative_to(root).as_posix(),
                    None,
                    "manifest-not-file",
                    "",
                    "manifest is a symlink or not a regular file",
                    "commit the manifest itself",
                )
            )
            continue
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
