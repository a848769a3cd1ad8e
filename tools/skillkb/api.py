"""The library API behind the CLI; tests and other tools call these functions directly."""

from __future__ import annotations

from pathlib import Path

from .diagnostics import Diagnostic, SkillkbError, errors_only, sort_key
from .index import build_index, index_drift, write_index
from .loader import Library, load_library
from .manifests import MANIFEST_DIR, GitError
from .readsets import snapshot, verify_against_clone, verify_against_manifests
from .schemas import stale_schemas, write_schemas
from .validate import missing_gates, validate


class UsageError(Exception):
    """A command was called with arguments that cannot work."""


def load_or_fail(root: Path) -> Library:
    """Load the library, raising ``SkillkbError`` if it has load-level errors (so nothing is built from it)."""
    library, problems = load_library(root)
    errors = errors_only(problems)
    if errors:
        raise SkillkbError(sorted(errors, key=sort_key))
    return library


def verify_readsets(root: Path, clones: dict[str, Path]) -> list[Diagnostic]:
    library = load_or_fail(root)
    out = verify_against_manifests(library)
    for repo, clone in sorted(clones.items()):
        out += verify_against_clone(library, repo, clone)
    return sorted(out, key=sort_key)


def show(root: Path, entry_id: str) -> dict:
    library = load_or_fail(root)
    entry_id = entry_id.strip("/")
    matches = [e for e in library.sorted_entries() if entry_id in (e.id, e.name)]
    if not matches:
        raise UsageError(f"no entry '{entry_id}'; `skillkb index` lists them in skill-index.json")
    entry = matches[0]
    record = next(e for e in build_index(library).entries if e.id == entry.id).model_dump(mode="json")
    record["missing_gates"] = missing_gates(entry, library)
    return record


__all__ = [
    "MANIFEST_DIR",
    "GitError",
    "SkillkbError",
    "UsageError",
    "build_index",
    "index_drift",
    "load_library",
    "load_or_fail",
    "show",
    "snapshot",
    "stale_schemas",
    "validate",
    "verify_readsets",
    "write_index",
    "write_schemas",
]
