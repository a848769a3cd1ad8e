"""Maps of upstream agent skills onto library entries (``sources/upstream-skills/*.yaml``).

vllm-ascend ships its own agent skills (``.agents/skills/…``). An entry that claims to be a superset of
one keeps a map: every heading of every file of the upstream skill at a pinned commit, its kind
(context, step, gate, deliverable, lesson) and where the entry covers it (``FILE#anchor`` inside the
entry folder). This module checks the map — every heading mapped to an anchor that exists, every file of
the upstream skill listed with the blob the committed manifest records, the heading list unchanged since
it was read at the pin (its digest) — and renders it as the entry's
``references/upstream-skill-map.md`` (generated; ``skillkb coverage --check`` catches drift).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .citations import FENCE, github_url
from .diagnostics import Diagnostic
from .htmlsafety import md_text
from .loader import HEADING, Library, split_sections
from .manifests import Manifest
from .yamlsrc import YamlProblem, parse_yaml

MAP_DIR = Path("sources/upstream-skills")
MAP_PAGE = "upstream-skill-map.md"
KINDS = ("context", "step", "gate", "deliverable", "lesson")


@dataclass(frozen=True)
class Heading:
    text: str
    level: int
    line: int
    kind: str
    covered_by: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class MappedFile:
    path: str
    blob: str
    headings: tuple[Heading, ...]
    headings_sha256: str  # digest of (level, heading, line) of every heading, taken from the file at the pin


def headings_digest(headings: list[tuple[int, str, int]]) -> str:
    """sha256 of the heading list as ``markdown_headings`` returns it, one ``level|line|heading`` per line.

    Recorded next to the headings when the map is made from the real file: CI has no upstream clone, so this
    is what catches a heading that was dropped, renamed or moved in the map by hand."""
    text = "".join(f"{level}|{line}|{heading}\n" for level, heading, line in headings)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SkillMap:
    source: str  # the map's path from the library root
    repo: str
    commit: str
    tag: str | None
    root: str
    entry: str
    files: tuple[MappedFile, ...]


def markdown_headings(text: str) -> list[tuple[int, str, int]]:
    """(level, heading, line) of every Markdown heading outside fenced code."""
    out, in_fence = [], False
    for number, line in enumerate(text.split("\n"), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else HEADING.match(line)
        if match:
            out.append((len(match[1]), match[2].strip(), number))
    return out


def _diag(file: str, code: str, field: str, message: str, fix: str) -> Diagnostic:
    return Diagnostic(file, None, code, field, message, fix)


def load_map(path: Path, display: str) -> tuple[SkillMap | None, list[Diagnostic]]:
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8")).data
    except (OSError, UnicodeDecodeError, YamlProblem) as exc:
        return None, [_diag(display, "upstream-map-invalid", "", f"cannot read the map: {exc}", "fix the YAML")]
    try:
        files = tuple(
            MappedFile(
                str(f["path"]),
                str(f["blob"]),
                tuple(
                    Heading(
                        str(h["heading"]),
                        int(h["level"]),
                        int(h["line"]),
                        str(h.get("kind", "")),
                        tuple(str(c) for c in h.get("covered_by") or ()),
                        str(h.get("note") or ""),
                    )
                    for h in f["headings"]
                ),
                str(f.get("headings_sha256") or ""),
            )
            for f in raw["files"]
        )
        skill_map = SkillMap(
            display, str(raw["repo"]), str(raw["commit"]), raw.get("tag"), str(raw["root"]), str(raw["entry"]), files
        )
    except (KeyError, TypeError, ValueError) as exc:
        return None, [
            _diag(
                display,
                "upstream-map-invalid",
                "",
                f"the map lacks a field or has a wrong type: {exc}",
                "see the header",
            )
        ]
    return skill_map, []


def load_maps(root: Path) -> tuple[list[SkillMap], list[Diagnostic]]:
    maps, problems = [], []
    folder = root / MAP_DIR
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        found, errors = load_map(path, path.relative_to(root).as_posix())
        problems += errors
        if found is not None:
            maps.append(found)
    return maps, problems


def entry_anchors(library: Library, entry_id: str) -> set[str]:
    """``FILE#anchor`` for every section of the entry's SKILL.md and reference files."""
    entry = library.entries.get(entry_id)
    if entry is None:
        return set()
    anchors = set()
    for doc in entry.documents():
        name = Path(doc.file).relative_to(entry.id).as_posix()
        anchors |= {f"{name}#{section.anchor}" for section in split_sections(entry.id, doc)}
    return anchors


def check_map(skill_map: SkillMap, library: Library) -> list[Diagnostic]:
    """Every heading mapped to an existing anchor; the file list equal to the upstream skill's at the pin."""
    file = skill_map.source
    if skill_map.entry not in library.entries:
        return [_diag(file, "upstream-map-entry", "entry", f"no entry '{skill_map.entry}'", "name an existing entry")]
    manifest = library.manifests.get(skill_map.repo, skill_map.commit)
    if manifest is None:
        out = [
            _diag(
                file,
                "upstream-map-manifest",
                "commit",
                f"no manifest for {skill_map.repo}@{skill_map.commit}",
                "snapshot the commit (skillkb readsets snapshot)",
            )
        ]
    else:
        out = _check_files(skill_map, manifest)
    anchors = entry_anchors(library, skill_map.entry)
    for mapped in skill_map.files:
        out += _check_headings(skill_map, mapped, anchors)
    return out


def _check_files(skill_map: SkillMap, manifest: Manifest) -> list[Diagnostic]:
    """The mapped files are exactly the upstream skill's markdown files, at the blobs the manifest records."""
    file = skill_map.source
    upstream = {p: r.blob for p, r in manifest.rows.items() if p.startswith(skill_map.root.rstrip("/") + "/")}
    upstream = {p: b for p, b in upstream.items() if p.endswith(".md")}
    listed = {f.path: f.blob for f in skill_map.files}
    out = [
        _diag(file, "upstream-map-file-missing", "files", f"{path} of the upstream skill is not mapped", "map it")
        for path in sorted(set(upstream) - set(listed))
    ]
    out += [
        _diag(file, "upstream-map-file-unknown", "files", f"{path} is not in {manifest.file}", "drop it")
        for path in sorted(set(listed) - set(upstream))
    ]
    out += [
        _diag(
            file,
            "upstream-map-blob",
            "files",
            f"{path}: blob {listed[path]} but the manifest has {upstream[path]} (the skill changed)",
            "re-read the file at the pinned commit and update its headings and mapping",
        )
        for path in sorted(set(listed) & set(upstream))
        if listed[path] != upstream[path]
    ]
    return out


def _check_headings(skill_map: SkillMap, mapped: MappedFile, anchors: set[str]) -> list[Diagnostic]:
    """One mapped file: its recorded headings are the ones read at the pin, each mapped to sections that exist."""
    file = skill_map.source
    out = []
    recorded = headings_digest([(h.level, h.text, h.line) for h in mapped.headings])
    if recorded != mapped.headings_sha256:
        out.append(
            _diag(
                file,
                "upstream-map-headings",
                f"{mapped.path}.headings_sha256",
                f"{mapped.path}: the recorded headings (sha256 {recorded[:12]}) are not the ones read at the pin "
                f"({mapped.headings_sha256[:12] or 'none recorded'}): a heading was dropped, renamed or moved",
                "list every heading exactly as the file has it at the commit (markdown_headings of `git show "
                "COMMIT:PATH`) and record headings_digest of that list",
            )
        )
    for heading in mapped.headings:
        where = f"{mapped.path} § {heading.text}"
        if heading.kind not in KINDS:
            out.append(_diag(file, "upstream-map-kind", "kind", f"{where}: kind '{heading.kind}'", f"one of {KINDS}"))
        if not heading.covered_by:
            out.append(
                _diag(
                    file,
                    "upstream-map-unmapped",
                    "covered_by",
                    f"{where} is not mapped to the entry",
                    "name the FILE#anchor of the entry that covers it",
                )
            )
        out += [
            _diag(
                file,
                "upstream-map-anchor",
                "covered_by",
                f"{where}: '{target}' is not a section of {skill_map.entry}",
                "use an anchor `skillkb` computes for that file (lower case, spaces to hyphens)",
            )
            for target in heading.covered_by
            if target not in anchors
        ]
    return out


def check_maps(library: Library) -> list[Diagnostic]:
    maps, problems = load_maps(library.root)
    for skill_map in maps:
        problems += check_map(skill_map, library)
    return problems


def render_map(skill_map: SkillMap) -> str:
    """The entry's reference page: one table per upstream file (heading, kind, where covered)."""
    tag = f" (tag `{skill_map.tag}`)" if skill_map.tag else ""
    counts = {kind: 0 for kind in KINDS}
    for mapped in skill_map.files:
        for heading in mapped.headings:
            counts[heading.kind] = counts.get(heading.kind, 0) + 1
    total = sum(counts.values())
    parts = [
        f"# Upstream skill `{skill_map.root.rsplit('/', 1)[-1]}`, mapped",
        "",
        f"Generated by `skillkb coverage` from `{skill_map.source}`; do not edit by hand.",
        "",
        f"Every heading of the agent skill `{skill_map.root}` in {skill_map.repo} at commit "
        f"`{skill_map.commit}`{tag}, and where this entry covers that step, gate or deliverable. "
        f"{total} headings: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n) + ". The map is checked by "
        "`skillkb validate` (every heading mapped to a section that exists; every file of the upstream skill "
        "listed with the blob the committed manifest records).",
        "",
    ]
    for mapped in skill_map.files:
        url = github_url(skill_map.repo, skill_map.commit, mapped.path)
        name = mapped.path.removeprefix(skill_map.root.rstrip("/") + "/")
        parts += [f"## {name}", "", f"[`{mapped.path}`]({url}) · blob `{mapped.blob[:12]}`", ""]
        parts += ["| Line | Upstream heading | Kind | Covered here by | Note |", "|---:|---|---|---|---|"]
        for heading in mapped.headings:
            links = ", ".join(f"[{md_text(t)}]({_relative(t)})" for t in heading.covered_by)
            title = "· " * (heading.level - 1) + md_text(heading.text)
            parts.append(f"| {heading.line} | {title} | {heading.kind} | {links} | {md_text(heading.note)} |")
        parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


def _relative(target: str) -> str:
    """A link from references/ to ``FILE#anchor`` of the entry folder."""
    file, _, anchor = target.partition("#")
    path = f"../{file}" if not file.startswith("references/") else file.removeprefix("references/")
    return f"{path}#{anchor}" if anchor else path


def generated_pages(library: Library) -> dict[Path, bytes]:
    """references/upstream-skill-map.md of every mapped entry, by path from the library root."""
    maps, _problems = load_maps(library.root)
    return {
        Path(skill_map.entry) / "references" / MAP_PAGE: render_map(skill_map).encode("utf-8")
        for skill_map in maps
        if skill_map.entry in library.entries
    }
