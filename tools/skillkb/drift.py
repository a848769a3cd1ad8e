"""Upstream drift: which cited files changed, moved or vanished between two commits of a repository.

Compares the readsets pinned at the ``from`` commit with the ``to`` manifest, and lists for each entry the
drifted files and the citations (file:line -> cited lines) that point into them: the entries to refresh.
Used by ``skillkb drift`` and, with the default vllm-ascend pair, by ``skillkb coverage``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath

from .citations import find_citations, resolve
from .diagnostics import SkillkbError, errors_only
from .loader import Entry, Library
from .manifests import MANIFEST_DIR, Manifest, parse_manifest, snapshot_rows
from .models import Readset

# The pinned vllm-ascend tag (v0.25.1rc1) and the main commit the library also reads; `skillkb coverage`
# regenerates docs/upstream-drift.md from exactly this pair.
DEFAULT_FROM = "vllm-project__vllm-ascend@9bf964cb4b87c8cd0d6852c41a55b3c29711fa95.tsv"
DEFAULT_TO = "vllm-project__vllm-ascend@182b75ea84ff13ece27b57391331ef8935410aea.tsv"
DRIFT_PAGE = Path("docs/upstream-drift.md")
MAX_CANDIDATES = 5  # "moved?" candidates listed per vanished file; the rest are counted
SHORT = 12

CHANGED, MOVED, MOVED_MAYBE, VANISHED = "changed", "moved", "moved?", "vanished"
KINDS = (CHANGED, MOVED, MOVED_MAYBE, VANISHED)


class DriftInputError(ValueError):
    """Drift inputs that cannot be compared (missing file, partial target, repositories differ)."""


@dataclass(frozen=True)
class FileDrift:
    path: str
    kind: str  # one of KINDS
    old_blob: str
    new_blob: str | None  # blob at the same path (changed) or at the moved path (moved)
    new_paths: tuple[str, ...]  # where it moved, or same-name candidates for "moved?"
    more_candidates: int  # candidates not listed in new_paths
    old_lines: int | None
    new_lines: int | None
    reread_at_target: bool  # the entry already has a readset at the target commit holding this file


@dataclass(frozen=True)
class CitationHit:
    file: str  # SKILL.md or references/*.md path from the library root
    line: int
    label: str
    path: str  # the cited upstream file
    start: int
    end: int


@dataclass
class EntryDrift:
    entry_id: str
    files_checked: int
    drifted: list[FileDrift] = field(default_factory=list)
    citations: list[CitationHit] = field(default_factory=list)
    target_readset_files: int = 0  # files in the entry's readset(s) at the target commit

    @property
    def not_reread(self) -> int:
        return sum(1 for f in self.drifted if not f.reread_at_target)


@dataclass
class DriftReport:
    repo: str
    from_commit: str
    to_commit: str
    from_label: str
    to_label: str
    from_tags: list[str]
    entries: list[EntryDrift]  # entries with a readset at the from commit, sorted by id
    target_only: list[str]  # entries with a readset at the target commit but none at the from commit

    def by_id(self) -> dict[str, EntryDrift]:
        return {e.entry_id: e for e in self.entries}

    def public(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------ inputs


def manifest_from_file(path: Path) -> Manifest:
    """A manifest read from a committed TSV; labelled by file name so output does not depend on cwd."""
    if not path.is_file():
        raise DriftInputError(f"no manifest file at {path}")
    manifest, problems = parse_manifest(path, path.name)
    errors = errors_only(problems)
    if errors:
        raise SkillkbError(errors)
    if manifest is None:  # parse_manifest reports a bad name as an error, so this is unreachable
        raise DriftInputError(f"{path} is not a manifest")
    return manifest


def manifest_from_clone(clone: Path, rev: str, repo: str) -> Manifest:
    commit, rows = snapshot_rows(clone, rev)
    label = rev if rev == commit else f"{rev} ({commit[:SHORT]})"
    return Manifest(repo=repo, commit=commit, partial=False, file=f"git {label}", rows={r.path: r for r in rows})


def default_pair(root: Path) -> tuple[Path, Path] | None:
    """The default manifests inside ``root``, or None when the library does not hold both."""
    pair = (root / MANIFEST_DIR / DEFAULT_FROM, root / MANIFEST_DIR / DEFAULT_TO)
    return pair if all(p.is_file() for p in pair) else None


def check_pair(old: Manifest, new: Manifest) -> None:
    if old.repo != new.repo:
        raise DriftInputError(f"the manifests are of different repositories: {old.repo} and {new.repo}")
    if new.partial:
        raise DriftInputError(
            f"{new.file} is a partial manifest; a vanished file cannot be told from an unlisted one. "
            "Snapshot the target commit from a full clone with `skillkb readsets snapshot`"
        )


# ------------------------------------------------------------------------------------------ compute


def classify(path: str, blob: str, old: Manifest, new: Manifest, blob_paths: dict[str, list[str]]) -> FileDrift | None:
    """How one file read at the old commit fares at the new one; None when it is unchanged."""
    old_row = old.rows.get(path)
    old_lines = old_row.lines if old_row else None
    row = new.rows.get(path)
    if row is not None:
        if row.blob == blob:
            return None
        return FileDrift(path, CHANGED, blob, row.blob, (), 0, old_lines, row.lines, False)
    same_blob = tuple(p for p in blob_paths.get(blob, []) if p != path)
    if same_blob:
        return FileDrift(path, MOVED, blob, blob, same_blob, 0, old_lines, new.rows[same_blob[0]].lines, False)
    name = PurePosixPath(path).name
    # Candidates are paths new at the target commit with the same file name: a move creates a new path.
    candidates = sorted(p for p, r in new.rows.items() if PurePosixPath(p).name == name and p not in old.rows)
    if candidates:
        shown = tuple(candidates[:MAX_CANDIDATES])
        return FileDrift(path, MOVED_MAYBE, blob, None, shown, len(candidates) - len(shown), old_lines, None, False)
    return FileDrift(path, VANISHED, blob, None, (), 0, old_lines, None, False)


def _matches(readset: Readset, manifest: Manifest) -> bool:
    return readset.repo == manifest.repo and readset.commit == manifest.commit


def entry_drift(entry: Entry, old: Manifest, new: Manifest, blob_paths: dict[str, list[str]]) -> EntryDrift | None:
    meta = entry.meta
    if meta is None:
        return None
    pinned = [r for r in meta.readsets if _matches(r, old)]
    if not pinned:
        return None
    target_paths = {f.path for r in meta.readsets if _matches(r, new) for f in r.files}
    drifted: dict[str, FileDrift] = {}
    files = {f.path: f.blob for r in pinned for f in r.files}
    for path in sorted(files):
        found = classify(path, files[path], old, new, blob_paths)
        if found is not None:
            reread = path in target_paths or any(p in target_paths for p in found.new_paths)
            drifted[path] = replace(found, reread_at_target=reread)
    result = EntryDrift(entry.id, len(files), [drifted[p] for p in sorted(drifted)])
    result.target_readset_files = len(target_paths)
    for doc in entry.documents():
        for citation in find_citations(doc.text, doc.first_line):
            resolved = resolve(citation, meta.readsets)
            if isinstance(resolved, str) or not _matches(resolved[0], old) or citation.path not in drifted:
                continue
            result.citations.append(
                CitationHit(doc.file, citation.line, citation.label, citation.path, citation.start, citation.end)
            )
    return result


def compute_drift(library: Library, old: Manifest, new: Manifest) -> DriftReport:
    """Drift of every entry's readsets pinned at ``old`` against the listing ``new``."""
    check_pair(old, new)
    blob_paths: dict[str, list[str]] = {}
    for path in sorted(new.rows):
        blob_paths.setdefault(new.rows[path].blob, []).append(path)
    entries, target_only, tags = [], [], set()
    for entry in library.sorted_entries():
        found = entry_drift(entry, old, new, blob_paths)
        if found is not None:
            entries.append(found)
        readsets = entry.meta.readsets if entry.meta else []
        tags.update(r.tag for r in readsets if _matches(r, old) and r.tag)
        if found is None and any(_matches(r, new) for r in readsets):
            target_only.append(entry.id)
    return DriftReport(old.repo, old.commit, new.commit, old.file, new.file, sorted(tags), entries, target_only)


def default_drift(library: Library) -> DriftReport | None:
    """The report between the default vllm-ascend pair, or None when the library lacks those manifests."""
    pair = default_pair(library.root)
    if pair is None:
        return None
    return compute_drift(library, manifest_from_file(pair[0]), manifest_from_file(pair[1]))


# ------------------------------------------------------------------------------------------- render


def _code(text: str) -> str:
    return f"`{text}`"


def describe(f: FileDrift) -> str:
    if f.kind == CHANGED:
        return f"changed ({f.old_blob[:7]} → {f.new_blob[:7] if f.new_blob else '?'})"
    if f.kind == MOVED:
        return "moved to " + ", ".join(_code(p) for p in f.new_paths)
    if f.kind == MOVED_MAYBE:
        more = f" and {f.more_candidates} more" if f.more_candidates else ""
        return "moved? same-name files new at the target: " + ", ".join(_code(p) for p in f.new_paths) + more
    return "vanished"


def _lines(f: FileDrift) -> str:
    old = "?" if f.old_lines is None else str(f.old_lines)
    return f"{old} → {f.new_lines}" if f.new_lines is not None else f"{old} → –"


def drift_summary(e: EntryDrift) -> str:
    """One cell for the coverage page: what drifted and how many citations it touches."""
    if not e.drifted:
        return "none"
    counts = [f"{sum(1 for f in e.drifted if f.kind == k)} {k}" for k in KINDS]
    kinds = ", ".join(c for c in counts if not c.startswith("0 "))
    return f"{kinds}; {len(e.citations)} citation(s); {e.not_reread} not re-read at target"


def header(report: DriftReport) -> list[str]:
    tag = f" ({', '.join(report.from_tags)})" if report.from_tags else ""
    return [
        "<!-- Generated by `skillkb coverage` (or `skillkb drift`) from the library and two upstream manifests;"
        " do not edit by hand. -->",
        "",
        f"# Upstream drift: {report.repo} {report.from_commit[:SHORT]}{tag} → {report.to_commit[:SHORT]}",
        "",
        f"- From: `{report.from_label}` (commit `{report.from_commit}`)",
        f"- To: `{report.to_label}` (commit `{report.to_commit}`)",
        "",
        "Only readsets pinned at the *from* commit are compared. A file is **changed** when its blob differs at",
        "the same path, **moved** when the same blob sits at another path, **moved?** when its path vanished and",
        "files with the same name are new at the target (candidates, check by hand), and **vanished** otherwise.",
        "Citations are `file:line` in the entry → cited upstream lines. *Re-read at target* means the entry",
        "already has a readset at the target commit holding that file (a refresh is under way or done).",
        "",
    ]


def render_markdown(report: DriftReport) -> str:
    out = header(report)
    drifted = [e for e in report.entries if e.drifted]
    clean = [e for e in report.entries if not e.drifted]
    total = sum(len(e.citations) for e in drifted)
    out += [
        "## Summary",
        "",
        f"{len(report.entries)} entr{'y' if len(report.entries) == 1 else 'ies'} read files at the from commit; "
        f"{len(drifted)} cite drifted files ({total} citation(s) in drifted files).",
        "",
        "## Entries to refresh",
        "",
    ]
    if drifted:
        out += [
            "| Entry | Files read | Changed | Moved | Moved? | Vanished | Citations affected | Not re-read at target |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for e in drifted:
            counts = " | ".join(str(sum(1 for f in e.drifted if f.kind == k)) for k in KINDS)
            out.append(f"| `{e.entry_id}` | {e.files_checked} | {counts} | {len(e.citations)} | {e.not_reread} |")
    else:
        out.append("None: no file read at the from commit drifted.")
    out += ["", "## Entries with a readset at the target commit", ""]
    with_target = [e for e in report.entries if e.target_readset_files]
    if with_target or report.target_only:
        for e in with_target:
            out.append(
                f"- `{e.entry_id}`: {e.target_readset_files} file(s) read at `{report.to_commit[:SHORT]}`; "
                f"{len(e.drifted) - e.not_reread} of {len(e.drifted)} drifted file(s) re-read there"
            )
        for entry_id in report.target_only:
            out.append(f"- `{entry_id}`: reads only at `{report.to_commit[:SHORT]}` (nothing to compare)")
    else:
        out.append("None.")
    out += ["", "## Unchanged", ""]
    out += [f"- `{e.entry_id}` ({e.files_checked} file(s))" for e in clean] or ["None."]
    out += ["", "## Details", ""]
    for e in drifted:
        out += _details(e)
    if not drifted:
        out += ["Nothing drifted.", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _details(e: EntryDrift) -> list[str]:
    out = [
        f"### `{e.entry_id}`",
        "",
        "| File | Drift | Lines (from → to) | Re-read at target | Citations |",
        "|---|---|---|---|---|",
    ]
    for f in e.drifted:
        cites = [c for c in e.citations if c.path == f.path]
        out.append(
            f"| `{f.path}` | {describe(f)} | {_lines(f)} | {'yes' if f.reread_at_target else 'no'} | {len(cites)} |"
        )
    out.append("")
    for f in e.drifted:
        cites = [c for c in e.citations if c.path == f.path]
        if not cites:
            continue
        where = ", ".join(f"`{_short_doc(c.file, e.entry_id)}:{c.line}` → {_span(c)}" for c in cites)
        out.append(f"- `{f.path}`: {where}")
    if e.citations:
        out.append("")
    return out


def _span(c: CitationHit) -> str:
    return f"L{c.start}" if c.end == c.start else f"L{c.start}-L{c.end}"


def _short_doc(file: str, entry_id: str) -> str:
    prefix = entry_id + "/"
    return file[len(prefix) :] if file.startswith(prefix) else file


def render_json(report: DriftReport) -> str:
    return json.dumps(report.public(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
