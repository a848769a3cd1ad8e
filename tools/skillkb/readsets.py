"""Readset verification against committed manifests and, optionally, real git clones."""

from __future__ import annotations

from pathlib import Path

from .diagnostics import Diagnostic
from .fsutil import atomic_write
from .loader import Library
from .manifests import (
    MANIFEST_DIR,
    GitError,
    blob_contents,
    count_lines,
    manifest_filename,
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


def verify_against_manifests(library: Library) -> list[Diagnostic]:
    out = []
    for entry in library.sorted_entries():
        if entry.meta is not None and entry.meta_yaml is not None:
            out += check_readsets(entry, library)
    return out


def verify_against_clone(library: Library, repo: str, clone: Path) -> list[Diagnostic]:
    """Check every readset of ``repo`` against a git clone: the commit, the tag, each path, blob and length."""
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


__all__ = ["MANIFEST_DIR", "snapshot", "verify_against_clone", "verify_against_manifests"]
