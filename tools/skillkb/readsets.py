"""Readset verification against committed manifests and, optionally, real git clones."""

from __future__ import annotations

import re
from pathlib import Path

from .diagnostics import Diagnostic, UsageError
from .fsutil import atomic_write
from .loader import Library
from .manifests import (
    ARTIFACT,
    MANIFEST_DIR,
    GitError,
    artifact_files,
    artifact_rows,
    blob_contents,
    count_lines,
    file_sha256,
    git_blob_sha,
    manifest_filename,
    render_artifact_info,
    render_manifest,
    resolve_commit,
    snapshot_rows,
    tree_blobs,
)
from .validate import check_readsets


def snapshot(clone: Path, repo: str, rev: str, out_dir: Path) -> Path:
    """Write ``OWNER__NAME@COMMIT.tsv`` for ``rev`` of ``clone`` into ``out_dir``; return its path."""
    commit, rows = snapshot_rows(clone, rev)
    path = out_dir / manifest_filename(repo, commit)
    atomic_write(path, render_manifest(rows))
    return path


VERSION_COMMIT = re.compile(r"""commit_id\s*=\s*['"](g?[0-9a-f]{7,40})['"]""")


def named_commit(files: dict[str, bytes]) -> str | None:
    """The commit a release artifact names for itself (setuptools-scm's ``_version.py``), if any."""
    for path in sorted(p for p in files if p.endswith("/_version.py") and p.count("/") <= 2):
        match = VERSION_COMMIT.search(files[path].decode("utf-8", "replace"))
        if match:
            return match[1]
    return None


def snapshot_artifact(
    artifact: Path, repo: str, commit: str, out_dir: Path, tag: str | None = None, url: str | None = None
) -> Path:
    """Write ``OWNER__NAME@COMMIT.artifact.tsv`` (every file of a release sdist/wheel) and its sidecar.

    ``commit`` is the full commit of the release tag; when the artifact names a commit itself (its
    ``_version.py``), the sidecar records it and loading refuses a ``commit`` that does not extend it.
    """
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise GitError(f"--commit must be the full 40-hex commit of the release tag, got '{commit}'")
    if not artifact.is_file():
        raise GitError(f"no artifact file at {artifact}")
    named = named_commit(artifact_files(artifact))
    if named and not commit.startswith(named.removeprefix("g")):
        raise GitError(f"{artifact.name} names commit {named}; {commit} does not extend it")
    path = out_dir / manifest_filename(repo, commit, ARTIFACT)
    atomic_write(path, render_manifest(artifact_rows(artifact)))
    version = re.sub(r"^[A-Za-z0-9_]+-(.+?)(\.tar\.gz|\.tgz|-.*\.whl|\.whl|\.zip)$", r"\1", artifact.name)
    info = {
        "repo": repo,
        "commit": commit,
        "tag": tag,
        "version": version,
        "artifact": artifact.name,
        "sha256": file_sha256(artifact),
        "url": url,
        "commit_named_by_artifact": named,
        "note": "Every regular file of the published artifact (sdist top folder cut); blobs are git blob SHAs.",
    }
    atomic_write(path.with_suffix(".json"), render_artifact_info(info))
    return path


def verify_against_artifact(library: Library, repo: str, artifact: Path) -> list[Diagnostic]:
    """Check the artifact is the one the manifest records (sha256), then every readset file of ``repo`` in it."""
    out: list[Diagnostic] = []
    manifests = [m for m in library.manifests.manifests.values() if m.repo == repo and m.kind == ARTIFACT]
    if not artifact.is_file():
        return [Diagnostic(str(artifact), None, "artifact-missing", "", "no such file", "pass the downloaded sdist")]
    digest = file_sha256(artifact)
    recorded = [m for m in manifests if (m.artifact or {}).get("sha256") == digest]
    if not recorded:
        return [
            Diagnostic(
                str(artifact),
                None,
                "artifact-unknown",
                "",
                f"sha256 {digest} matches no release-artifact manifest of {repo}",
                "download the artifact the manifest's sidecar names, or snapshot this one",
            )
        ]
    files = {path: git_blob_sha(data) for path, data in artifact_files(artifact).items()}
    commits = {m.commit for m in recorded}
    for entry in library.sorted_entries():
        if entry.meta is None or entry.meta_yaml is None:
            continue
        for i, readset in enumerate(entry.meta.readsets):
            if readset.repo != repo or readset.commit not in commits:
                continue
            for rfile in readset.files:
                if files.get(rfile.path) != rfile.blob:
                    out.append(
                        Diagnostic(
                            entry.meta_path,
                            entry.meta_yaml.line_of(("readsets", i)),
                            "artifact-blob-mismatch",
                            "readsets",
                            f"{rfile.path}: not in {artifact.name} with blob {rfile.blob}",
                            "record the blob of the file as the artifact holds it",
                        )
                    )
    return out


def verify_against_manifests(library: Library) -> list[Diagnostic]:
    out = []
    for entry in library.sorted_entries():
        if entry.meta is not None and entry.meta_yaml is not None:
            out += check_readsets(entry, library)
    return out


def readset_repos(library: Library) -> list[str]:
    """Every upstream repository a loaded readset names, sorted."""
    return sorted({r.repo for e in library.entries.values() if e.meta is not None for r in e.meta.readsets})


def verify_against_clone(library: Library, repo: str, clone: Path) -> list[Diagnostic]:
    """Check every readset of ``repo`` against a git clone: the commit, the tag, each path, blob and length.

    A repo no readset names is a usage error: verifying nothing and reporting success would hide a typo.
    """
    known = readset_repos(library)
    if repo not in known:
        listed = ", ".join(known) if known else "none (no entry has a readset)"
        raise UsageError(f"--clone {repo}={clone}: no readset uses {repo}; the readsets use: {listed}")
    out: list[Diagnostic] = []
    for entry in library.sorted_entries():
        if entry.meta is None or entry.meta_yaml is None:
            continue
        for i, readset in enumerate(entry.meta.readsets):
            if readset.repo == repo:
                out += _verify_readset(entry.meta_path, entry.meta_yaml.line_of(("readsets", i)), readset, clone)
    return out


def _verify_readset(file: str, line: int | None, readset, clone: Path) -> list[Diagnostic]:
    def diag(code: str, message: str, fix: str) -> Diagnostic:
        return Diagnostic(file, line, code, "readsets", message, fix)

    try:
        resolve_commit(clone, readset.commit)
    except GitError:
        return [
            diag(
                "clone-commit-missing",
                f"{readset.commit} is not in the clone at {clone}",
                "fetch that commit into the clone, or correct the pin",
            )
        ]
    out = []
    if readset.tag:
        try:
            tagged = resolve_commit(clone, f"refs/tags/{readset.tag}")
            if tagged != readset.commit:
                out.append(
                    diag(
                        "clone-tag-mismatch",
                        f"tag {readset.tag} resolves to {tagged}, not {readset.commit}",
                        "record the commit the tag resolves to",
                    )
                )
        except GitError:
            out.append(diag("clone-tag-missing", f"tag {readset.tag} is not in the clone", "fetch tags, or drop 'tag'"))
    blobs = dict(tree_blobs(clone, readset.commit))
    contents = blob_contents(clone, [blobs[f.path] for f in readset.files if f.path in blobs])
    for rfile in readset.files:
        blob = blobs.get(rfile.path)
        if blob is None:
            out.append(
                diag("clone-path-missing", f"{rfile.path} does not exist at {readset.commit[:12]}", "correct the path")
            )
        elif blob != rfile.blob:
            out.append(
                diag(
                    "clone-blob-mismatch",
                    f"{rfile.path}: blob {rfile.blob} but the clone has {blob}",
                    "record the blob from `git ls-tree`",
                )
            )
        elif max(e for _, e in rfile.ranges()) > count_lines(contents[blob]):
            out.append(
                diag(
                    "clone-lines-range",
                    f"{rfile.path}: lines read go past the end of the file",
                    "record ranges inside the file",
                )
            )
    return out


__all__ = [
    "MANIFEST_DIR",
    "snapshot",
    "snapshot_artifact",
    "verify_against_artifact",
    "verify_against_clone",
    "verify_against_manifests",
]
