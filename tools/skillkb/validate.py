"""Validation: schema checks plus every cross-entry rule, reported as actionable diagnostics."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from .citations import CITATION, count_cited_facts, find_citations, malformed_citations, resolve
from .diagnostics import Diagnostic, sort_key
from .htmlsafety import PROTOCOL_RELATIVE, SOURCE_TAGS, check_markdown, pipeline_problem
from .loader import (
    CASES_FILE,
    REAL_CASES_FILE,
    Document,
    Entry,
    Library,
    load_library,
    load_training_files,
    suggest_name,
)
from .manifests import ARTIFACT, PARTIAL, ManifestStore
from .models import SKILL_NAME, Readset, Status, thread_key
from .tokenize import estimate_tokens
from .upstream_skill import check_maps

ALLOWED_FRONTMATTER = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def d(file: str, line: int | None, code: str, fld: str, message: str, fix: str) -> Diagnostic:
    return Diagnostic(file, line, code, fld, message, fix)


# ------------------------------------------------------------------------------------ entry statistics


@dataclass(frozen=True)
class EntryStats:
    cited_facts: int
    triage_rows: int
    eval_cases: int
    readset_files: int
    verified_files: int
    partial_files: int
    artifact_files: int = 0  # verified against a release-artifact manifest


def triage_rows(entry: Entry) -> int:
    for section in entry.sections():
        if section.level == 2 and section.heading.strip().lower() == "triage":
            rows = [line for line in section.text.split("\n") if line.strip().startswith("|")]
            data = [r for r in rows if not re.fullmatch(r"\s*\|[\s:|-]+\|?\s*", r)]
            return max(len(data) - 1, 0)  # minus the header row
    return 0


def file_evidence(manifests: ManifestStore, readset: Readset, path: str, blob: str) -> str:
    manifest = manifests.get(readset.repo, readset.commit)
    row = manifest.rows.get(path) if manifest else None
    if row is None or row.blob != blob:
        return "unverified"
    return {PARTIAL: "partial", ARTIFACT: "artifact"}.get(manifest.kind, "verified")


def readset_evidence(manifests: ManifestStore, readset: Readset) -> str:
    levels = {file_evidence(manifests, readset, f.path, f.blob) for f in readset.files}
    for level in ("unverified", "partial", "artifact"):
        if level in levels:
            return level
    return "verified"


def entry_stats(entry: Entry, library: Library) -> EntryStats:
    evidence = Counter(
        file_evidence(library.manifests, r, f.path, f.blob)
        for r in (entry.meta.readsets if entry.meta else [])
        for f in r.files
    )
    return EntryStats(
        cited_facts=sum(count_cited_facts(doc.text) for doc in entry.documents()),
        triage_rows=triage_rows(entry),
        eval_cases=sum(1 for c in library.cases if entry.id in c.expected),
        readset_files=sum(evidence.values()),
        verified_files=evidence["verified"],
        partial_files=evidence["partial"],
        artifact_files=evidence["artifact"],
    )


def missing_gates(entry: Entry, library: Library, state: str | None = None) -> list[str]:
    """What keeps ``entry`` from meeting the gates of ``state`` (default: its own status)."""
    meta = entry.meta
    if meta is None:
        return ["entry.yaml does not load"]
    state = state or meta.status.state.value
    stats = entry_stats(entry, library)
    gate = library.rules.gate_for(meta.tier, state)
    missing = []
    if stats.cited_facts < gate.cited_facts:
        missing.append(f"cited facts {stats.cited_facts} < {gate.cited_facts}")
    if stats.triage_rows < gate.triage_rows:
        missing.append(f"triage rows {stats.triage_rows} < {gate.triage_rows}")
    if stats.eval_cases < gate.eval_cases:
        missing.append(f"eval cases {stats.eval_cases} < {gate.eval_cases}")
    if state == "covered":
        if not meta.readsets:
            missing.append("no readset")
        else:
            artifact_ok = "artifact" in library.rules.covered_evidence
            accepted = stats.verified_files + (stats.artifact_files if artifact_ok else 0)
            if accepted < stats.readset_files:
                weak = stats.readset_files - accepted
                kind = "partial-manifest" if stats.partial_files else "unverified"
                if stats.artifact_files and not artifact_ok:
                    kind = "release-artifact manifests are not accepted by schemas/tier-rules.yaml"
                missing.append(f"{weak} readset file(s) not verified against a full manifest ({kind})")
        absent = [
            a for a in library.rules.tiers[meta.tier].required_anchors if getattr(meta.version_anchors, a) is None
        ]
        if absent:
            missing.append(f"version anchors missing: {', '.join(absent)}")
    return missing


# ---------------------------------------------------------------------------------------- frontmatter


def check_frontmatter(entry: Entry) -> list[Diagnostic]:
    if entry.frontmatter_yaml is None:
        return []
    fm, parsed, file = entry.frontmatter, entry.frontmatter_yaml, entry.skill_path
    out = []
    for key in fm:
        if key not in ALLOWED_FRONTMATTER:
            out.append(
                d(
                    file,
                    parsed.line_of((key,)),
                    "frontmatter-unknown-key",
                    str(key),
                    f"'{key}' is not one of the portable Agent Skills keys {list(ALLOWED_FRONTMATTER)}",
                    "move provenance and ownership data to entry.yaml, or into metadata as a string",
                )
            )
    out += _check_name(entry, fm.get("name"), parsed.line_of(("name",)))
    out += _check_description(file, fm.get("description"), parsed.line_of(("description",)))
    compat = fm.get("compatibility")
    if compat is not None and (not isinstance(compat, str) or len(compat) > MAX_COMPATIBILITY):
        out.append(
            d(
                file,
                parsed.line_of(("compatibility",)),
                "compatibility-invalid",
                "compatibility",
                f"compatibility must be a string of at most {MAX_COMPATIBILITY} characters",
                "shorten it to the environment requirements",
            )
        )
    if "license" in fm and not isinstance(fm["license"], str):
        out.append(
            d(
                file,
                parsed.line_of(("license",)),
                "license-invalid",
                "license",
                "license must be a string",
                "write an SPDX identifier such as Apache-2.0",
            )
        )
    out += _check_metadata(file, fm, parsed)
    return out


def _check_name(entry: Entry, name: object, line: int | None) -> list[Diagnostic]:
    file = entry.skill_path
    if name is not None and not isinstance(name, str):
        return [
            d(
                file,
                line,
                "name-invalid",
                "name",
                f"name is a {type(name).__name__} ({name!r}), not text",
                f"write 'name: {entry.name}' (the folder name)",
            )
        ]
    if not isinstance(name, str) or not name.strip():
        return [
            d(
                file,
                line,
                "name-missing",
                "name",
                "frontmatter has no 'name'",
                f"add 'name: {entry.name}' (the folder name)",
            )
        ]
    if not name.isascii():
        return [
            d(
                file,
                line,
                "name-invalid",
                "name",
                f"name '{name}' has non-ASCII characters",
                "use only a-z, 0-9 and single hyphens",
            )
        ]
    if len(name) > MAX_NAME or not re.fullmatch(SKILL_NAME, name):
        suggestion = suggest_name(name)
        upper = " has uppercase letters and" if name != name.lower() else ""
        fix = f"name it '{suggestion}' and rename the folder to match" if suggestion else "rename skill and folder"
        return [
            d(
                file,
                line,
                "name-invalid",
                "name",
                f"name '{name}'{upper} is not kebab-case of at most {MAX_NAME} chars (a-z, 0-9, single inner hyphens)",
                fix,
            )
        ]
    if name != entry.name:
        return [
            d(
                file,
                line,
                "name-mismatch",
                "name",
                f"name '{name}' differs from its folder '{entry.name}'",
                f"set 'name: {entry.name}' or rename the folder to '{name}'",
            )
        ]
    return []


def _check_description(file: str, description: object, line: int | None) -> list[Diagnostic]:
    if not isinstance(description, str) or not description.strip():
        return [
            d(
                file,
                line,
                "description-empty",
                "description",
                "description is missing or empty",
                "say what the skill does and when to use it, with the error strings people type",
            )
        ]
    out = []
    if len(description) > MAX_DESCRIPTION:
        out.append(
            d(
                file,
                line,
                "description-too-long",
                "description",
                f"description has {len(description)} characters, over {MAX_DESCRIPTION}",
                "shorten it; move detail into the body",
            )
        )
    if "<" in description or ">" in description:
        out.append(
            d(
                file,
                line,
                "description-angle",
                "description",
                "description contains '<' or '>'",
                "rephrase without angle brackets (agents' catalogs are XML-like)",
            )
        )
    return out


def _check_metadata(file: str, fm: dict, parsed) -> list[Diagnostic]:
    if "metadata" not in fm:
        return []
    line = parsed.line_of(("metadata",))
    meta = fm["metadata"]
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        return [
            d(
                file,
                line,
                "metadata-invalid",
                "metadata",
                "metadata must map strings to strings",
                "quote every value, and nest nothing",
            )
        ]
    if ("metadata",) in parsed.flow_paths:
        return [
            d(
                file,
                line,
                "metadata-flow",
                "metadata",
                "metadata is written in flow style {…}",
                "write one 'key: value' per line (block style); strict YAML readers reject flow style",
            )
        ]
    return []


# ---------------------------------------------------------------------------------------------- body


def check_sections(entry: Entry, library: Library) -> list[Diagnostic]:
    if entry.body is None:
        return []
    required = library.rules.sections
    found = [
        s.heading for s in entry.sections() if s.level == 2 and s.entry_id == entry.id and s.file == entry.skill_path
    ]
    out = []
    missing = [s for s in required if s not in found]
    if missing:
        out.append(
            d(
                entry.skill_path,
                None,
                "section-missing",
                "",
                f"missing section(s): {', '.join(missing)}",
                f"add '## ' headings in this order: {', '.join(required)}",
            )
        )
    present = [h for h in found if h in required]
    if present != [s for s in required if s in present]:
        out.append(
            d(
                entry.skill_path,
                None,
                "section-order",
                "",
                f"sections out of order: {', '.join(present)}",
                f"order them: {', '.join(required)}",
            )
        )
    tokens = estimate_tokens(entry.body.text)
    if tokens > library.rules.skill_md_tokens:
        out.append(
            d(
                entry.skill_path,
                None,
                "skill-too-many-tokens",
                "",
                f"the body is about {tokens} tokens, over {library.rules.skill_md_tokens}",
                "an agent loads SKILL.md whole: move depth into references/*.md and link it from the body",
            )
        )
    lines = entry.body.text.count("\n") + entry.body.first_line
    if lines > library.rules.skill_md_lines:
        out.append(
            d(
                entry.skill_path,
                None,
                "skill-too-long",
                "",
                f"SKILL.md has {lines} lines",
                f"keep it under {library.rules.skill_md_lines}; move deep dives into references/",
            )
        )
    return out


def check_vocabulary(entry: Entry, library: Library) -> list[Diagnostic]:
    if entry.meta is None:
        return []
    rule = library.rules.tiers[entry.meta.tier]
    if not rule.forbidden_terms:
        return []
    out = []
    what = "NPU/Ascend/CANN vocabulary" if entry.meta.tier == 1 else "vLLM vocabulary"
    targets = [Document(entry.skill_path, entry.description, 2), *entry.documents()]
    for doc in targets:
        for offset, line in enumerate(doc.text.split("\n")):
            for term in rule.forbidden_terms:
                match = term.search(line)
                if match:
                    out.append(
                        d(
                            doc.file,
                            doc.first_line + offset,
                            f"tier{entry.meta.tier}-vocabulary",
                            "",
                            f"Tier {entry.meta.tier} text uses {what}: '{match.group(0)}'",
                            "keep this tier's text within its boundary; link the other tier's entry in "
                            "entry.yaml cross_refs instead",
                        )
                    )
                    break
    return out


SAFETY_FIX = {
    "unsafe-html": "write Markdown instead of HTML, or put it in `code`; raw tags may only be "
    f"{', '.join(sorted(SOURCE_TAGS))}, without attributes, and an attribute list {{: …}} may not set event "
    "handlers, styles or other attributes outside the site's allow-list",
    "unsafe-link": "link to an http or https page by its full URL, to a mailto: address, or to a file inside "
    "the entry with a relative path",
}


def check_markdown_safety(entry: Entry) -> list[Diagnostic]:
    """The entry's Markdown as the site renders it (``htmlsafety.check_markdown``, the check the docs build
    and export share): raw and rendered HTML against the allow-lists, link schemes, relative links that
    leave the entry."""
    out = []
    for doc in entry.documents():
        report = check_markdown(doc.text, doc.first_line)
        out += [d(doc.file, line, code, "", message, SAFETY_FIX[code]) for line, code, message in report.problems]
        base = Path(doc.file).parent
        for line, target in report.links:
            out += _check_link(doc.file, line, base, entry, target)
    return out


def check_markdown_pipeline(library: Library) -> list[Diagnostic]:
    """mkdocs.yml must render Markdown with the pipeline ``check_markdown`` renders with, or the site could
    publish what ``validate`` never saw."""
    path = library.root / "mkdocs.yml"
    if not path.is_file():
        return []  # a library without a site: nothing renders it
    try:
        text = path.read_text(encoding="utf-8")
        problem = pipeline_problem(text)
    except (OSError, UnicodeDecodeError) as exc:
        text, problem = "", f"mkdocs.yml cannot be read ({exc})"
    if problem is None:
        return []
    rows = text.split("\n")
    line = next((i for i, row in enumerate(rows, 1) if row.startswith("markdown_extensions")), None)
    fix = (
        "keep markdown_extensions identical to htmlsafety.SITE_MARKDOWN_YAML; to use another extension, review "
        "the HTML it emits, then add it to both"
    )
    return [d("mkdocs.yml", line, "markdown-pipeline", "markdown_extensions", problem, fix)]


def markdown_safety(library: Library) -> list[Diagnostic]:
    """Every Markdown-safety diagnostic of the library: what ``validate`` reports and ``export`` refuses."""
    out = check_markdown_pipeline(library)
    for entry in library.sorted_entries():
        out += check_markdown_safety(entry)
    return out


def _check_link(file: str, line: int | None, base: Path, entry: Entry, target: str) -> list[Diagnostic]:
    if SCHEME.match(target) or target.startswith("#") or PROTOCOL_RELATIVE.match(target):
        return []  # schemes and protocol-relative targets are judged by url_problem (unsafe-link)
    if target.startswith(("/", "\\")):  # browsers read a leading backslash as a slash
        return [
            d(
                file,
                line,
                "link-escape",
                "",
                f"absolute link '{target}'",
                "use a path relative to this file, inside the entry folder",
            )
        ]
    # Browsers undo %-escapes in paths (%2e%2e is ..) and treat backslashes as slashes.
    path = unquote(re.split(r"[#?]", target, maxsplit=1)[0]).replace("\\", "/")
    resolved = (base / path).as_posix()
    parts: list[str] = []
    for part in resolved.split("/"):
        if part == "..":
            if parts:
                parts.pop()
            else:
                parts.append("..")
        elif part not in ("", "."):
            parts.append(part)
    normal = "/".join(parts)
    if not (normal == entry.id or normal.startswith(entry.id + "/")):
        return [
            d(
                file,
                line,
                "link-escape",
                "",
                f"relative link '{target}' leaves the entry folder",
                "link only to files inside the entry, or use the full https URL",
            )
        ]
    return []


def check_citations(entry: Entry, library: Library) -> list[Diagnostic]:
    if entry.meta is None:
        return []  # entry.yaml is already reported; resolving against no readsets would only add noise
    readsets = entry.meta.readsets
    out = []
    for doc in entry.documents():
        for number, token in malformed_citations(doc.text, doc.first_line):
            out.append(
                d(
                    doc.file,
                    number,
                    "citation-malformed",
                    "",
                    f"'{token}' is not a valid citation",
                    "write [REPO@SHA7:path#Lstart-Lend], e.g. [vllm-ascend@9bf964c:setup.py#L1-L5]",
                )
            )
        for cite in find_citations(doc.text, doc.first_line):
            found = resolve(cite, readsets)
            if isinstance(found, str):
                out.append(
                    d(
                        doc.file,
                        cite.line,
                        "citation-unresolved",
                        "",
                        f"{cite.text}: {found}",
                        "add the file to a readset in entry.yaml, or correct the citation",
                    )
                )
                continue
            readset, file = found
            out += _check_cited_lines(doc.file, cite, readset, file, library.manifests)
    return out


def _check_cited_lines(file, cite, readset, rfile, manifests) -> list[Diagnostic]:
    if cite.start > cite.end or cite.start < 1:
        return [
            d(
                file,
                cite.line,
                "citation-range",
                "",
                f"{cite.text}: line range is empty or reversed",
                "write #Lstart-Lend with start ≤ end",
            )
        ]
    manifest = manifests.get(readset.repo, readset.commit)
    row = manifest.rows.get(rfile.path) if manifest else None
    if row is not None and cite.end > row.lines:
        return [
            d(
                file,
                cite.line,
                "citation-range",
                "",
                f"{cite.text}: line {cite.end} is past the end of the file ({row.lines} lines)",
                "cite lines that exist at the pinned commit",
            )
        ]
    if not any(start <= cite.start and cite.end <= end for start, end in rfile.ranges()):
        return [
            d(
                file,
                cite.line,
                "citation-unread",
                "",
                f"{cite.text}: lines {cite.start}-{cite.end} are outside the lines read ({rfile.lines})",
                "read those lines and add them to the readset's 'lines', or correct the citation",
            )
        ]
    return []


# ------------------------------------------------------------------------------------------ metadata


def check_meta(entry: Entry, library: Library) -> list[Diagnostic]:
    meta, file = entry.meta, entry.meta_path
    if meta is None or entry.meta_yaml is None:
        return []
    line = entry.meta_yaml.line_of
    out = []
    if meta.id != entry.id:
        out.append(
            d(
                file,
                line(("id",)),
                "id-mismatch",
                "id",
                f"id '{meta.id}' differs from the folder path '{entry.id}'",
                f"set 'id: {entry.id}' (an entry's id is its path)",
            )
        )
    rule = library.rules.tiers[meta.tier]
    if entry.id.rsplit("/", 1)[0] != meta.owner:
        out.append(
            d(
                file,
                line(("owner",)),
                "owner-mismatch",
                "owner",
                f"owner '{meta.owner}' is not the folder that holds the entry ('{entry.id.rsplit('/', 1)[0]}')",
                "move the entry under its canonical owner path, or correct 'owner'",
            )
        )
    if meta.owner not in rule.owners:
        out.append(
            d(
                file,
                line(("owner",)),
                "owner-tier",
                "owner",
                f"Tier {meta.tier} entries are owned by {', '.join(rule.owners)}, not '{meta.owner}'",
                "fix the tier or move the entry to an owner path of its tier",
            )
        )
    elif not (library.root / meta.owner).is_dir():
        out.append(
            d(
                file,
                line(("owner",)),
                "owner-missing",
                "owner",
                f"owner path '{meta.owner}' does not exist",
                "create the owner folder",
            )
        )
    out += check_readsets(entry, library)
    out += check_cross_refs(entry, library)
    out += check_anchors(entry)
    out += check_gates(entry, library)
    return out


def check_readsets(entry: Entry, library: Library) -> list[Diagnostic]:
    meta, file = entry.meta, entry.meta_path
    assert meta is not None and entry.meta_yaml is not None
    out = []
    seen: set[tuple[str, str]] = set()
    for i, readset in enumerate(meta.readsets):
        at = entry.meta_yaml.line_of(("readsets", i))
        key = (readset.repo, readset.commit)
        if key in seen:
            out.append(
                d(
                    file,
                    at,
                    "readset-duplicate",
                    f"readsets.{i}",
                    f"two readsets for {key[0]}@{key[1]}",
                    "merge their files into one readset",
                )
            )
        seen.add(key)
        manifest = library.manifests.get(*key)
        if manifest is None:
            out.append(
                d(
                    file,
                    at,
                    "manifest-missing",
                    f"readsets.{i}",
                    f"no manifest for {readset.repo}@{readset.commit} under sources/manifests/",
                    f"run `skillkb readsets snapshot --clone PATH --repo {readset.repo} --commit {readset.commit}`",
                )
            )
            continue
        for j, rfile in enumerate(readset.files):
            out += _check_readset_file(entry, i, j, rfile, manifest)
    return out


def _check_readset_file(entry: Entry, i: int, j: int, rfile, manifest) -> list[Diagnostic]:
    file, at = entry.meta_path, entry.meta_yaml.line_of(("readsets", i, "files", j))
    where = f"readsets.{i}.files.{j}"
    row = manifest.rows.get(rfile.path)
    if row is None:
        return [
            d(
                file,
                at,
                "readset-path-unknown",
                f"{where}.path",
                f"{rfile.path} is not in {manifest.file}",
                "check the path at that commit (git ls-tree), or snapshot the right commit",
            )
        ]
    if row.blob != rfile.blob:
        return [
            d(
                file,
                at,
                "readset-blob-mismatch",
                f"{where}.blob",
                f"blob {rfile.blob} differs from the manifest's {row.blob} for {rfile.path}",
                "re-read the file at the pinned commit and record its blob from `git ls-tree`",
            )
        ]
    past = [f"{s}-{e}" for s, e in rfile.ranges() if e > row.lines or s > e]
    if past:
        return [
            d(
                file,
                at,
                "readset-lines-range",
                f"{where}.lines",
                f"lines {', '.join(past)} are reversed or past the end of {rfile.path} ({row.lines} lines)",
                f"record ranges within 1-{row.lines}",
            )
        ]
    return []


def check_cross_refs(entry: Entry, library: Library) -> list[Diagnostic]:
    meta, file = entry.meta, entry.meta_path
    assert meta is not None and entry.meta_yaml is not None
    out = []
    seen = set()
    for i, ref in enumerate(meta.cross_refs):
        at = entry.meta_yaml.line_of(("cross_refs", i))
        if ref.id == entry.id:
            out.append(
                d(
                    file,
                    at,
                    "xref-self",
                    f"cross_refs.{i}.id",
                    "the entry refers to itself",
                    "remove the self-reference",
                )
            )
        elif ref.id not in library.entries:
            out.append(
                d(
                    file,
                    at,
                    "xref-dangling",
                    f"cross_refs.{i}.id",
                    f"no entry '{ref.id}'",
                    "point at an existing entry id (its folder path) or add that entry",
                )
            )
        if ref.id in seen:
            out.append(
                d(
                    file,
                    at,
                    "xref-duplicate",
                    f"cross_refs.{i}.id",
                    f"'{ref.id}' is referenced twice",
                    "keep one cross-reference per entry",
                )
            )
        seen.add(ref.id)
    return out


def check_anchors(entry: Entry) -> list[Diagnostic]:
    """A version anchor that names a commit must agree with a readset pinned at the same tag."""
    meta, file = entry.meta, entry.meta_path
    assert meta is not None and entry.meta_yaml is not None
    out = []
    for readset in meta.readsets:
        for name, anchor in meta.version_anchors:
            if anchor and anchor.commit and readset.tag == anchor.ref and readset.commit != anchor.commit:
                out.append(
                    d(
                        file,
                        entry.meta_yaml.line_of(("version_anchors", name)),
                        "anchor-commit-mismatch",
                        f"version_anchors.{name}.commit",
                        f"tag {anchor.ref} is anchored at {anchor.commit} but a readset pins it at {readset.commit}",
                        "record the commit the tag really resolves to in both places",
                    )
                )
    return out


def check_gates(entry: Entry, library: Library) -> list[Diagnostic]:
    meta = entry.meta
    assert meta is not None and entry.meta_yaml is not None
    if meta.status.state != Status.covered:
        return []
    return [
        d(
            entry.meta_path,
            entry.meta_yaml.line_of(("status", "state")),
            "gate-covered",
            "status.state",
            f"'covered' but the admission gate is not met: {problem}",
            "meet the gate (schemas/tier-rules.yaml) or set status to 'to-refine' with a reason",
        )
        for problem in missing_gates(entry, library)
    ]


# ------------------------------------------------------------------------------------------- library


def check_uniqueness(library: Library) -> list[Diagnostic]:
    out = []
    for claimed, folders in sorted(library.duplicate_ids.items()):
        for folder in folders:
            out.append(
                d(
                    f"{folder}/entry.yaml",
                    None,
                    "id-duplicate",
                    "id",
                    f"id '{claimed}' is claimed by {len(folders)} entries: {', '.join(folders)}",
                    "give each entry the id of its own folder",
                )
            )
    by_name: dict[str, list[str]] = {}
    for entry in library.sorted_entries():
        by_name.setdefault(entry.name, []).append(entry.id)
    for name, ids in sorted(by_name.items()):
        if len(ids) > 1:
            for entry_id in ids:
                out.append(
                    d(
                        f"{entry_id}/SKILL.md",
                        None,
                        "name-duplicate",
                        "name",
                        f"skill name '{name}' is owned by {len(ids)} entries: {', '.join(ids)}",
                        "names are installed flat: keep one canonical owner and cross-reference it",
                    )
                )
    return out


def check_cases(library: Library) -> list[Diagnostic]:
    return _check_case_set(library, library.cases, CASES_FILE.as_posix(), "authored") + _check_case_set(
        library, library.real_cases, REAL_CASES_FILE.as_posix(), "real"
    )


def _check_case_set(library: Library, cases: list, file: str, origin: str) -> list[Diagnostic]:
    out = []
    counts = Counter(c.id for c in cases)
    for case in cases:
        if case.origin != origin:
            out.append(
                d(
                    file,
                    None,
                    "case-origin",
                    f"{case.id}.origin",
                    f"case '{case.id}' is '{case.origin}' in the {origin} set",
                    f"keep {origin} cases here and the others in their own file",
                )
            )
    threads: dict[object, list[str]] = {}
    for case in cases:
        if case.source:
            threads.setdefault(thread_key(case.source), []).append(case.source)
    for sources in sorted(threads.values()):
        if len(sources) > 1:
            out.append(
                d(
                    file,
                    None,
                    "case-duplicate-source",
                    "source",
                    f"{len(sources)} cases copy the same thread {sources[0]}",
                    "keep one question per thread (the split is by thread)",
                )
            )
    for case_id, count in sorted(counts.items()):
        if count > 1:
            out.append(
                d(
                    file,
                    None,
                    "case-duplicate-id",
                    "id",
                    f"case id '{case_id}' appears {count} times",
                    "give every case a unique id",
                )
            )
    for case in cases:
        for fld in ("expected", "acceptable", "negatives"):
            for entry_id in getattr(case, fld):
                if entry_id not in library.entries:
                    out.append(
                        d(
                            file,
                            None,
                            "case-unknown-entry",
                            f"{case.id}.{fld}",
                            f"case '{case.id}' names unknown entry '{entry_id}'",
                            "use an existing entry id",
                        )
                    )
    return out


def check_training(library: Library) -> list[Diagnostic]:
    """The training questions load, name existing entries, are not written twice, and no real title comes
    from a thread of the real eval set (its case would vouch for itself)."""
    out: list[Diagnostic] = []
    eval_threads = {thread_key(c.source) for c in library.real_cases if c.source}
    seen: Counter[tuple[str, str]] = Counter()  # a judged and a thread-labelled row may share a title
    for path, questions, problems in load_training_files(library.root):
        file = path.as_posix()
        out += problems
        for question in questions:
            seen[question.origin, question.text] += 1
            if seen[question.origin, question.text] == 2:
                out.append(
                    d(
                        file,
                        None,
                        "training-duplicate",
                        "text",
                        f"training question {question.text[:60]!r} appears more than once",
                        "keep one copy: a repeated row counts twice in the fit",
                    )
                )
            if question.label != "none" and question.label not in library.entries:
                out.append(
                    d(
                        file,
                        None,
                        "training-unknown-entry",
                        "label",
                        f"training question {question.text[:60]!r} names unknown entry '{question.label}'",
                        "use an existing entry id, or 'none' for an in-domain question no entry answers",
                    )
                )
            if question.source and thread_key(question.source) in eval_threads:
                out.append(
                    d(
                        file,
                        None,
                        "training-eval-thread",
                        "source",
                        f"{question.origin} title from {question.source} is a thread of the real eval set",
                        "drop it: a thread is either an eval case or training data, never both",
                    )
                )
    return out


def validate_library(library: Library) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for entry in library.sorted_entries():
        out += check_frontmatter(entry)
        out += check_sections(entry, library)
        out += check_vocabulary(entry, library)
        out += check_markdown_safety(entry)
        out += check_citations(entry, library)
        out += check_meta(entry, library)
    out += check_markdown_pipeline(library)
    out += check_uniqueness(library)
    out += check_cases(library)
    out += check_training(library)
    out += check_maps(library)
    out += check_tuning_files(library.root)
    return out


def check_tuning_files(root: Path) -> list[Diagnostic]:
    """The files that tune search (the lexicon, the fitted calibration) load clean: search would otherwise
    serve with less help, so validate says so."""
    from .retrieval import Calibration
    from .signals import Lexicon

    return Lexicon.load(root)[1] + Calibration.load(root)[1]


def validate(root: Path, cases_file: Path | None = None) -> list[Diagnostic]:
    """Load and validate the library at ``root``; return every diagnostic, sorted."""
    library, problems = load_library(root, cases_file)
    return sorted(set(problems + validate_library(library)), key=sort_key)


__all__ = ["CITATION", "EntryStats", "entry_stats", "missing_gates", "validate", "validate_library"]
