"""``skillkb export``: install entries as plain Agent Skills folders (e.g. into .claude/skills or .agents/skills).

Each selected entry becomes ``TARGET/<name>/`` holding ``SKILL.md`` and ``references/*.md``, with
citations rewritten as links to the upstream files at the pinned commits. Next to the folders:

- ``available_skills.xml``: the ``<available_skills>`` catalogue (name, description, location relative
  to the target) that agents without native skill discovery paste into their system prompt;
- ``skills-lock.json``: per exported folder its entry id, sha256 digest (``fsutil.folder_digest``) and
  every file's sha256, plus the catalogue's. The lock is the record of what the export wrote: only those
  files are ever rewritten, and only while unchanged (``--force`` overwrites edits); files a user added
  are never deleted; a folder is removed only while exactly as exported; any other folder in the target
  is left alone (``--check`` reports it as stray). Targets inside the library are refused.

Writes are atomic and deterministic, so re-running is byte-identical. A library with Markdown that
``skillkb validate`` refuses as unsafe is not exported at all (``refuse_unsafe_markdown``, the check
``validate`` and ``docs build`` run): agents and editors may render an exported SKILL.md too.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .agent_text import link_citations
from .api import UsageError, load_or_fail
from .diagnostics import SkillkbError, errors_only, sort_key
from .fsutil import atomic_write, folder_digest, folder_files
from .loader import SKILL_FILE, Entry, Library, split_frontmatter
from .models import Status
from .validate import markdown_safety

CATALOG_FILE = "available_skills.xml"
LOCK_FILE = "skills-lock.json"
LOCK_VERSION = 2
GENERATOR = "skillkb export"
SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
STATUSES = tuple(s.value for s in Status)


@dataclass
class ExportPlan:
    """What the target should hold: folder name -> (entry, {relative path -> bytes})."""

    entries: dict[str, Entry]
    files: dict[str, dict[str, bytes]]
    warnings: list[str] = field(default_factory=list)


@dataclass
class ExportReport:
    written: list[str] = field(default_factory=list)  # folders with at least one changed file
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # folders the export created earlier, now deselected
    warnings: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- plan


def select(library: Library, tier: int | None = None, status: str | None = None) -> list[Entry]:
    if tier is not None and tier not in (1, 2, 3):
        raise UsageError(f"--tier must be 1, 2 or 3, got {tier}")
    if status is not None and status not in STATUSES:
        raise UsageError(f"--status must be one of {', '.join(STATUSES)}, got '{status}'")
    return [
        e
        for e in library.sorted_entries()
        if e.meta is not None
        and (tier is None or e.meta.tier == tier)
        and (status is None or e.meta.status.state.value == status)
    ]


def render_markdown(text: str, entry: Entry, display: str, warnings: list[str]) -> bytes:
    linked, unresolved = link_citations(text, entry.meta.readsets if entry.meta else [])
    warnings.extend(f"{display}: citation [{label}] does not resolve; left as written" for label in unresolved)
    return (linked.rstrip("\n") + "\n").encode("utf-8")


def render_entry(entry: Entry, warnings: list[str]) -> dict[str, bytes]:
    """The exported files of one entry: SKILL.md (frontmatter kept verbatim) and references/*.md."""
    raw = (entry.folder / SKILL_FILE).read_text(encoding="utf-8")
    split = split_frontmatter(raw)
    if isinstance(split, str):  # load_or_fail already refused this; keep the message if it ever happens
        raise UsageError(f"{entry.skill_path}: {split}")
    front, body, _line = split
    files = {SKILL_FILE: f"---\n{front}---\n".encode() + render_markdown(body, entry, entry.skill_path, warnings)}
    for name, doc in sorted(entry.references.items()):
        files[f"references/{name}"] = render_markdown(doc.text, entry, doc.file, warnings)
    return files


class UnsafeMarkdown(SkillkbError):
    """The library has Markdown that ``skillkb validate`` refuses as unsafe; nothing is exported."""


def refuse_unsafe_markdown(library: Library) -> None:
    """Raise ``UnsafeMarkdown`` when the library has Markdown that ``skillkb validate`` refuses as unsafe.

    It is the same check (``validate.markdown_safety``) on the whole library, as ``docs build`` runs it:
    agents and editors may render an exported SKILL.md, so what the site would refuse is not handed out.
    """
    errors = errors_only(markdown_safety(library))
    if errors:
        raise UnsafeMarkdown(sorted(errors, key=sort_key))


def plan_export(library: Library, tier: int | None = None, status: str | None = None) -> ExportPlan:
    refuse_unsafe_markdown(library)  # before anything is read for, or written to, the target
    entries = {e.name: e for e in select(library, tier, status)}
    warnings: list[str] = []
    files = {name: render_entry(entry, warnings) for name, entry in sorted(entries.items())}
    return ExportPlan(entries, files, warnings)


def files_digest(files: dict[str, bytes]) -> str:
    """The digest ``fsutil.folder_digest`` gives the folder once these files are written."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode("utf-8"))
        digest.update(files[rel])
    return "sha256:" + digest.hexdigest()


def render_catalog(plan: ExportPlan) -> bytes:
    lines = ["<available_skills>"]
    for name, entry in sorted(plan.entries.items()):
        lines += [
            "<skill>",
            f"<name>{html.escape(name)}</name>",
            f"<description>{html.escape(entry.description)}</description>",
            f"<location>{html.escape(name)}/{SKILL_FILE}</location>",
            "</skill>",
        ]
    lines.append("</available_skills>")
    return ("\n".join(lines) + "\n").encode("utf-8")


def render_lock(plan: ExportPlan, tier: int | None, status: str | None, catalog_digest: str) -> bytes:
    """The lock: per folder its entry, digest and every file's sha256 — the record of what the export
    wrote, so it never overwrites or deletes anything else."""
    data = {
        "generator": GENERATOR,
        "version": LOCK_VERSION,
        "filters": {"tier": tier, "status": status},
        "catalog": catalog_digest,
        "skills": {
            name: {
                "id": entry.id,
                "tier": entry.meta.tier if entry.meta else None,
                "status": entry.meta.status.state.value if entry.meta else None,
                "digest": files_digest(plan.files[name]),
                "files": {rel: sha256(data) for rel, data in sorted(plan.files[name].items())},
            }
            for name, entry in sorted(plan.entries.items())
        },
    }
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


# ----------------------------------------------------------------------------------------- target


def check_target(library: Library, target: Path) -> Path:
    """The resolved target, refusing places inside the library (its sources, .git, tools …) and files."""
    resolved = target.expanduser().resolve()
    root = library.root.resolve()
    for ancestor in (resolved, *resolved.parents):
        if ancestor.exists() and not ancestor.is_dir():
            where = "is a file" if ancestor == resolved else f"lies under the file {ancestor}"
            raise UsageError(f"--target {target} {where}; pass a folder (e.g. ~/project/.claude/skills)")
    if resolved == root or root.is_relative_to(resolved):
        raise UsageError(f"--target {target} holds the library itself; pass a folder outside it")
    if resolved.is_relative_to(root):
        raise UsageError(
            f"--target {target} is inside the library ({root}); export into the project that uses the skills, "
            "e.g. ~/project/.claude/skills"
        )
    return resolved


def read_lock(target: Path) -> dict:
    """The export's own record of what it wrote (empty when there is none); refuses a lock it cannot trust."""
    path = target / LOCK_FILE
    if not path.exists():
        return {"skills": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        skills = data["skills"]
        if data.get("generator") != GENERATOR or not isinstance(skills, dict):
            raise ValueError("not written by skillkb export")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{path} is not a skillkb export lock ({exc}); move it away or choose another --target"
        ) from exc
    bad = sorted(name for name in skills if not isinstance(name, str) or not SAFE_NAME.match(name))
    if bad:
        raise UsageError(f"{path} names folders that are not skill names: {', '.join(map(str, bad))}")
    if not all(isinstance(record, dict) for record in skills.values()):
        raise UsageError(f"{path} has malformed skill records; move it away or choose another --target")
    return data


def target_folders(target: Path) -> list[str]:
    if not target.is_dir():
        return []
    return sorted(p.name for p in target.iterdir() if p.is_dir() and not p.name.startswith("."))


def _owned_folder(target: Path, name: str) -> Path | None:
    """The folder ``name`` if it is a real folder directly inside the target (never a symlink)."""
    folder = target / name
    if folder.is_symlink() or not folder.is_dir():
        return None
    return folder if folder.resolve().parent == target else None


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pristine(folder: Path, record: dict) -> bool:
    """True when the folder holds exactly what the export wrote there (its recorded digest)."""
    return folder.is_dir() and folder_digest(folder) == record.get("digest")


def changed_files(folder: Path, record: dict) -> list[str]:
    """Files the export wrote into ``folder`` that were edited since (per-file digests of the lock)."""
    recorded = record.get("files")
    if not isinstance(recorded, dict):  # an older lock: only the folder digest is known
        return [] if pristine(folder, record) else ["(folder changed since the export; its lock has no file digests)"]
    changed = []
    for rel, digest in sorted(recorded.items()):
        path = folder / rel
        if path.is_file() and not path.is_symlink() and sha256(path.read_bytes()) != digest:
            changed.append(rel)
    return changed


# ---------------------------------------------------------------------------------------- actions


def export(
    library: Library, target: Path, tier: int | None = None, status: str | None = None, force: bool = False
) -> ExportReport:
    """Write the selected entries; never delete or overwrite a file the export did not write unchanged.

    Files a user edited after an export are refused (``force`` overwrites them); files a user added are
    left in place with a warning; a deselected folder is removed only while it is exactly as exported.
    """
    target = check_target(library, target)
    plan = plan_export(library, tier, status)
    lock = read_lock(target)
    owned: dict[str, dict] = lock["skills"]
    foreign = [n for n in plan.entries if (target / n).exists() and n not in owned]
    if foreign:
        raise UsageError(
            f"{target} already holds folder(s) not created by skillkb export: {', '.join(foreign)}; "
            "move them away (the export never overwrites folders it did not create)"
        )
    conflicts = [
        f"{name}/{rel}" for name in plan.entries if name in owned for rel in changed_files(target / name, owned[name])
    ]
    catalog = target / CATALOG_FILE
    new_catalog = render_catalog(plan)
    if catalog.is_file() and sha256(catalog.read_bytes()) not in (lock.get("catalog"), sha256(new_catalog)):
        conflicts.append(CATALOG_FILE)
    if conflicts and not force:
        raise UsageError(
            f"{target}: file(s) changed since the last export or not written by it: {', '.join(conflicts)}; "
            "move your changes away, or pass --force to overwrite them"
        )
    report = ExportReport(warnings=list(plan.warnings))
    for name, files in plan.files.items():
        written, extra = write_folder(target / name, files)
        (report.written if written else report.unchanged).append(name)
        report.warnings += [f"{name}/{rel}: not written by the export; left in place" for rel in extra]
    for name in sorted(set(owned) - set(plan.entries)):
        folder = _owned_folder(target, name)
        if folder is None:
            continue
        if pristine(folder, owned[name]):
            shutil.rmtree(folder)
            report.removed.append(name)
        else:
            report.warnings.append(f"{name}: no longer selected but changed since the export; left in place")
    atomic_write(catalog, new_catalog)
    atomic_write(target / LOCK_FILE, render_lock(plan, tier, status, sha256(new_catalog)))
    return report


def write_folder(folder: Path, files: dict[str, bytes]) -> tuple[bool, list[str]]:
    """Write ``files`` into ``folder``; (anything changed, files present that the export did not write)."""
    if folder.is_symlink():
        raise UsageError(f"{folder} is a symlink; remove it so the export can write a real folder")
    changed = False
    for rel, data in sorted(files.items()):
        changed |= atomic_write(folder / rel, data)
    extra = [p.relative_to(folder).as_posix() for p in folder_files(folder)]
    return changed, sorted(rel for rel in extra if rel not in files)


def check(library: Library, target: Path, tier: int | None = None, status: str | None = None) -> list[str]:
    """Problems that make the target differ from a fresh export (empty when in sync)."""
    target = check_target(library, target)
    plan = plan_export(library, tier, status)
    problems = []
    for name, files in plan.files.items():
        folder = target / name
        if not folder.is_dir():
            problems.append(f"{name}: missing (expected from {plan.entries[name].id})")
        elif folder_digest(folder) != files_digest(files):
            problems.append(f"{name}: differs from {plan.entries[name].id}{_diff_hint(folder, files)}")
    owned = read_lock(target)["skills"] if (target / LOCK_FILE).exists() else {}
    for name in target_folders(target):
        if name not in plan.entries:
            origin = "left from an earlier export" if name in owned else "not created by skillkb export"
            problems.append(f"{name}: stray folder ({origin})")
    lock = render_lock(plan, tier, status, sha256(render_catalog(plan)))
    for file, expected in ((CATALOG_FILE, render_catalog(plan)), (LOCK_FILE, lock)):
        path = target / file
        if not path.is_file() or path.read_bytes() != expected:
            problems.append(f"{file}: missing or out of date")
    return problems


def _diff_hint(folder: Path, files: dict[str, bytes]) -> str:
    present = {p.relative_to(folder).as_posix(): p for p in folder_files(folder)}
    changed = sorted(rel for rel in files if rel in present and present[rel].read_bytes() != files[rel])
    missing = sorted(set(files) - set(present))
    extra = sorted(set(present) - set(files))
    parts = [f"changed {', '.join(changed)}"] if changed else []
    parts += [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"extra {', '.join(extra)}"] if extra else []
    return f" ({'; '.join(parts)})" if parts else ""


# --------------------------------------------------------------------------------------------- CLI


def cmd_export(args: argparse.Namespace) -> int:
    try:
        return _run_export(args)
    except UnsafeMarkdown:
        # The CLI prints each diagnostic after this line, then the counts, and exits 1.
        print(
            "skillkb export: refused, nothing was written: the library has Markdown that `skillkb validate` "
            "refuses as unsafe (fix these, then export again)",
            file=sys.stderr,
        )
        raise


def _run_export(args: argparse.Namespace) -> int:
    library = load_or_fail(args.root)
    target = args.target if args.target.is_absolute() else Path.cwd() / args.target
    if args.check:
        problems = check(library, target, args.tier, args.status)
        for problem in problems:
            print(f"export differs: {problem}", file=sys.stderr)
        if problems:
            print(f"run `skillkb export --target {args.target}` to bring it in sync", file=sys.stderr)
            return 1
        print(f"{args.target}: in sync with the library")
        return 0
    report = export(library, target, args.tier, args.status, force=args.force)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    total = len(report.written) + len(report.unchanged)
    print(
        f"{args.target}: {total} skill(s) exported ({len(report.written)} written, {len(report.unchanged)} unchanged"
        + (f", removed {', '.join(report.removed)}" if report.removed else "")
        + f"); catalog {CATALOG_FILE}, lock {LOCK_FILE}"
    )
    return 0


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="install entries as Agent Skills folders (e.g. .claude/skills)")
    p.add_argument("--target", type=Path, required=True, help="folder to write, e.g. .agents/skills or .claude/skills")
    p.add_argument("--tier", type=int, choices=[1, 2, 3], default=None, help="only entries of this tier")
    p.add_argument("--status", choices=list(STATUSES), default=None, help="only entries in this state, e.g. covered")
    p.add_argument("--check", action="store_true", help="exit 1 naming folders that differ, are missing or stray")
    p.add_argument("--force", action="store_true", help="overwrite exported files that were edited since the export")
    p.set_defaults(func=cmd_export)
