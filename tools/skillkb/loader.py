"""Loading the library: entries (SKILL.md + entry.yaml + references), manifests, rules and eval cases.

Loading never raises on bad content: every problem becomes a ``Diagnostic`` and the entry is kept with
whatever could be read, so validation can report all problems in one pass.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from .citations import FENCE
from .diagnostics import Diagnostic, SkillkbError
from .fsutil import not_regular, read_text, symlinks_under
from .manifests import ManifestStore, load_manifests
from .models import ENTRY_ID, SKILL_NAME, EntryMeta, EvalCase, TrainingQuestion
from .rules import Rules, RulesProblem, load_rules
from .yamlsrc import NUMBER_SHAPED, ParsedYaml, YamlProblem, parse_yaml

ENTRY_ROOTS = ("hardware", "repositories")
DOCS_DIR = "docs"  # the site's hand-written pages (mkdocs.yml docs_dir): published as they are
SKILL_FILE = "SKILL.md"
META_FILE = "entry.yaml"
CASES_FILE = Path("evals/retrieval/cases.jsonl")  # authored cases: they count toward the admission gates
REAL_CASES_FILE = Path("evals/retrieval/real/cases.jsonl")  # real users' questions, copied from public threads
# The query classifier's training questions (never scored): written from the entries, and real titles
# labelled by judges from the title alone or by the root cause their thread shows
# (evals/retrieval/training/README.md).
TRAINING_FILES = tuple(Path(f"evals/retrieval/training/{name}.jsonl") for name in ("written", "judged", "threads"))
EVAL_SETS = {"authored": CASES_FILE, "real": REAL_CASES_FILE}
REFERENCE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*\.md$")
MAX_JSON_DEPTH = 32
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
SHA_FIELDS = ("commit", "blob")
META_MAX_BYTES = 65_536  # the largest entry.yaml is ~20 KiB; more is a pasted list, slow to parse
FRONTMATTER_MAX_BYTES = 16_384  # name, description (1,024 characters), license, compatibility, metadata


@dataclass
class Section:
    """A part of a Markdown file under one heading, the unit retrieval ranks."""

    entry_id: str
    file: str  # path from the repository root
    heading: str
    heading_path: tuple[str, ...]
    anchor: str
    level: int
    start_line: int
    text: str


@dataclass
class Document:
    file: str  # path from the repository root
    text: str
    first_line: int  # line of the file where ``text`` starts


@dataclass
class Entry:
    id: str
    folder: Path
    frontmatter: dict[str, Any] = field(default_factory=dict)
    frontmatter_yaml: ParsedYaml | None = None
    body: Document | None = None
    meta: EntryMeta | None = None
    meta_yaml: ParsedYaml | None = None
    references: dict[str, Document] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def skill_path(self) -> str:
        return f"{self.id}/{SKILL_FILE}"

    @property
    def meta_path(self) -> str:
        return f"{self.id}/{META_FILE}"

    @property
    def description(self) -> str:
        value = self.frontmatter.get("description")
        return value if isinstance(value, str) else ""

    def documents(self) -> list[Document]:
        docs = [self.body] if self.body else []
        return docs + [self.references[k] for k in sorted(self.references)]

    def sections(self) -> list[Section]:
        return [s for doc in self.documents() for s in split_sections(self.id, doc)]


@dataclass
class Library:
    root: Path
    rules: Rules
    entries: dict[str, Entry]
    manifests: ManifestStore
    cases: list[EvalCase]
    duplicate_ids: dict[str, list[str]] = field(default_factory=dict)  # claimed id -> folders claiming it
    real_cases: list[EvalCase] = field(default_factory=list)

    def sorted_entries(self) -> list[Entry]:
        return [self.entries[k] for k in sorted(self.entries)]


# ------------------------------------------------------------------------------------------- markdown


def slugify(heading: str) -> str:
    """Anchor for a heading, the one the site gives it too (pymdownx ``slugify(case="lower")`` in
    mkdocs.yml): lower case, Unicode word characters, '-' and spaces kept, each space a hyphen."""
    text = unicodedata.normalize("NFC", re.sub(r"</?[^>]*>", "", heading)).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-") or "section"


def split_sections(entry_id: str, doc: Document) -> list[Section]:
    """Split Markdown at headings (ignoring fenced code); text before the first heading is 'Overview'."""
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: dict[str, Any] = {"heading": "Overview", "level": 0, "start": doc.first_line, "lines": []}
    in_fence = False
    seen: dict[str, int] = {}

    def flush() -> None:
        text = "\n".join(current["lines"]).strip()
        if not text and current["level"] == 0:
            return
        base = slugify(current["heading"])
        count = seen.get(base, 0)
        seen[base] = count + 1
        path = tuple(h for _, h in stack) if current["level"] else ("Overview",)
        sections.append(
            Section(
                entry_id,
                doc.file,
                current["heading"],
                path,
                base if not count else f"{base}_{count}",
                current["level"],
                current["start"],
                text,
            )
        )

    for offset, line in enumerate(doc.text.split("\n")):
        if FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else HEADING.match(line)
        if not match:
            current["lines"].append(line)
            continue
        flush()
        level, heading = len(match[1]), match[2].strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        current = {"heading": heading, "level": level, "start": doc.first_line + offset, "lines": []}
    flush()
    return sections


# -------------------------------------------------------------------------------------------- entries


def suggest_name(name: str) -> str | None:
    """A valid kebab-case name close to ``name``, or None when nothing sensible remains."""
    folded = re.sub(r"[^a-z0-9]+", "-", unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower())
    folded = folded.strip("-")[:64].strip("-")
    return folded if folded and re.fullmatch(SKILL_NAME, folded) else None


def scan_entry_tree(root: Path) -> tuple[list[Path], list[Diagnostic]]:
    """Entry folders (holding a SKILL.md or an entry.yaml) under hardware/ and repositories/.

    Nothing is followed through a symlink: every link in the tree, to a file or a folder, is reported,
    since a link could publish a file from anywhere (``.git/config``) on the site, in exports and over MCP.
    """
    folders: set[Path] = set()
    problems: list[Diagnostic] = []
    for top in ENTRY_ROOTS:
        base = root / top
        links = [base] if base.is_symlink() else []
        if not links and base.is_dir():
            for here, dirs, files in os.walk(base, followlinks=False):
                links += [Path(here) / n for n in [*dirs, *files] if (Path(here) / n).is_symlink()]
                dirs[:] = [d for d in dirs if not (Path(here) / d).is_symlink()]
                rel = Path(here).relative_to(root).parts
                if (SKILL_FILE in files or META_FILE in files) and "references" not in rel:
                    folders.add(Path(here))
        problems += [symlink_problem(link, root) for link in sorted(links)]
    return sorted(folders, key=lambda p: p.relative_to(root).as_posix()), problems


def symlink_problem(link: Path, root: Path) -> Diagnostic:
    return _diag(
        link.relative_to(root).as_posix(),
        None,
        "symlink",
        "",
        "symlinks are refused inside the library (a link can publish any file, e.g. .git/config)",
        "replace the link with the file or folder itself",
    )


def scan_docs_tree(root: Path) -> list[Diagnostic]:
    """Symlinks and non-regular files under docs/, refused as in entry folders.

    mkdocs publishes docs/ as it finds it and follows links, so a link there (``docs/leak.md ->
    ../.git/config``) would put any file on the site and in its search index; a FIFO would block the build.
    """
    docs = root / DOCS_DIR
    if docs.is_symlink():
        return [symlink_problem(docs, root)]
    if not docs.is_dir():
        return []
    problems = [symlink_problem(link, root) for link in symlinks_under(docs)]
    for here, _dirs, files in os.walk(docs, followlinks=False):
        for path in sorted(Path(here) / name for name in files):
            problem = not_regular(path)
            if problem is not None and problem.code == "not-regular-file":  # links are reported above
                problems.append(
                    _diag(path.relative_to(root).as_posix(), None, problem.code, "", problem.message, problem.fix)
                )
    return problems


def entry_path_problem(folder: Path, root: Path) -> Diagnostic | None:
    """Why a folder's path cannot be an entry id (upper case, underscores, spaces…), with a valid fix."""
    entry_id = folder.relative_to(root).as_posix()
    if re.fullmatch(ENTRY_ID, entry_id) and len(entry_id) <= 200 and len(folder.name) <= 64:
        return None
    parts = [suggest_name(part) for part in entry_id.split("/")]
    suggestion = "/".join(p for p in parts if p) if all(parts) else None
    fix = f"rename the folders to '{suggestion}'" if suggestion else "rename the folders to kebab-case (a-z, 0-9, -)"
    return _diag(
        entry_id,
        None,
        "entry-path-invalid",
        "",
        f"entry folder path '{entry_id}' is not an id: every folder is kebab-case (a-z, 0-9, single hyphens), "
        "the name at most 64 characters",
        fix,
    )


def split_frontmatter(text: str) -> tuple[str, str, int] | str:
    """(frontmatter, body, first body line) or the reason the frontmatter cannot be found."""
    if not text.startswith("---\n"):
        return "SKILL.md must start with a '---' line opening the YAML frontmatter"
    end = text.find("\n---\n", 3)
    if end == -1:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            return "the frontmatter is not closed by a '---' line"
    front = text[4 : end + 1]
    body = text[end + 5 :]
    return front, body, front.count("\n") + 3


def _diag(file: str, line: int | None, code: str, fld: str, message: str, fix: str) -> Diagnostic:
    return Diagnostic(file, line, code, fld, message, fix)


def _read(path: Path, root: Path, display: str, problems: list[Diagnostic], max_bytes: int) -> str | None:
    if path.is_symlink():
        return None  # scan_entry_tree reported it
    # normalise: a BOM or CRLF is reported here, once, and the content is still checked, so the entry is
    # not also reported for every section and gate an unread file seems to miss.
    text, problem = read_text(path, max_bytes, normalise=True)
    if problem:
        problems.append(_diag(display, None, problem.code, "", problem.message, problem.fix))
    return text


def load_skill_md(entry: Entry, root: Path, rules: Rules, problems: list[Diagnostic]) -> None:
    path = entry.folder / SKILL_FILE
    display = entry.skill_path
    if not path.exists():
        problems.append(
            _diag(
                display,
                None,
                "skill-missing",
                "",
                "the entry has no SKILL.md",
                "add SKILL.md with frontmatter (name, description) and the body",
            )
        )
        return
    text = _read(path, root, display, problems, rules.skill_md_bytes)
    if text is None:
        return
    split = split_frontmatter(text)
    if isinstance(split, str):
        problems.append(
            _diag(
                display,
                1,
                "frontmatter-missing",
                "",
                split,
                "start the file with '---', the YAML keys, then a closing '---'",
            )
        )
        entry.body = Document(display, text, 1)
        return
    front, body, body_line = split
    entry.body = Document(display, body, body_line)
    size = len(front.encode("utf-8"))
    if size > FRONTMATTER_MAX_BYTES:
        problems.append(
            _diag(
                display,
                1,
                "frontmatter-too-large",
                "",
                f"the frontmatter is {size} bytes, over the {FRONTMATTER_MAX_BYTES}-byte limit",
                "keep SKILL.md's frontmatter to name, a description and short metadata; move the rest to the body",
            )
        )
        return
    try:
        parsed = parse_yaml(front, line_offset=1)
    except YamlProblem as exc:
        problems.append(_diag(display, exc.line, "frontmatter-yaml", "", str(exc), "fix the YAML syntax"))
        return
    if not isinstance(parsed.data, dict):
        problems.append(
            _diag(
                display,
                2,
                "frontmatter-not-mapping",
                "",
                "frontmatter is not a mapping of keys",
                "write 'name: ...' and 'description: ...' lines",
            )
        )
        return
    entry.frontmatter = parsed.data
    entry.frontmatter_yaml = parsed


def _pydantic_problems(exc: ValidationError, parsed: ParsedYaml, display: str) -> list[Diagnostic]:
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        field_name = ".".join(str(p) for p in loc) or "(root)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            fix = f"add the required field '{loc[-1]}'"
        elif error["type"] == "extra_forbidden":
            fix = f"remove '{loc[-1]}' or move it where docs/authoring.md puts it"
        elif error["type"] == "string_pattern_mismatch":
            fix = "write the value in the documented form (see docs/authoring.md)"
        else:
            fix = "correct the value (see docs/authoring.md and schemas/entry.schema.json)"
        problems.append(_diag(display, parsed.line_of(loc), "meta-schema", field_name, message, fix))
    return problems


def _number_shaped_shas(parsed: ParsedYaml, display: str) -> list[Diagnostic]:
    problems = []
    for path, raw in parsed.plain_scalars.items():
        if path and path[-1] in SHA_FIELDS and NUMBER_SHAPED.match(raw):
            problems.append(
                _diag(
                    display,
                    parsed.line_of(path),
                    "sha-unquoted",
                    ".".join(map(str, path)),
                    f"unquoted value {raw!r} is read by YAML as a number, not a SHA",
                    f'quote it: {path[-1]}: "{raw}"',
                )
            )
    return problems


def load_entry_yaml(entry: Entry, root: Path, problems: list[Diagnostic]) -> None:
    path = entry.folder / META_FILE
    display = entry.meta_path
    if not path.exists():
        problems.append(
            _diag(
                display,
                None,
                "meta-missing",
                "",
                "the entry has no entry.yaml",
                "add entry.yaml (see docs/authoring.md)",
            )
        )
        return
    text = _read(path, root, display, problems, META_MAX_BYTES)
    if text is None:
        return
    try:
        parsed = parse_yaml(text)
    except YamlProblem as exc:
        problems.append(_diag(display, exc.line, "meta-yaml", "", str(exc), "fix the YAML syntax"))
        return
    entry.meta_yaml = parsed
    if not isinstance(parsed.data, dict):
        problems.append(
            _diag(
                display,
                1,
                "meta-not-mapping",
                "",
                "entry.yaml is not a mapping of fields",
                "write the fields of docs/authoring.md",
            )
        )
        return
    unquoted = _number_shaped_shas(parsed, display)
    if unquoted:
        problems.extend(unquoted)
        return
    try:
        entry.meta = EntryMeta.model_validate(parsed.data)
    except ValidationError as exc:
        problems.extend(_pydantic_problems(exc, parsed, display))


def load_references(entry: Entry, root: Path, problems: list[Diagnostic]) -> None:
    folder = entry.folder / "references"
    if not folder.exists():
        return
    if folder.is_symlink() or not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            continue  # scan_entry_tree reported it
        if path.is_dir():
            continue
        if path.parent != folder:
            problems.append(
                _diag(
                    rel,
                    None,
                    "reference-depth",
                    "",
                    "reference files live one level deep",
                    "move it directly under references/",
                )
            )
            continue
        if path.suffix != ".md":
            problems.append(
                _diag(
                    rel,
                    None,
                    "reference-type",
                    "",
                    "reference files are Markdown (.md)",
                    "convert it to Markdown or remove it",
                )
            )
            continue
        if not REFERENCE_NAME.match(path.name):
            problems.append(
                _diag(
                    rel,
                    None,
                    "reference-name",
                    "",
                    f"reference file name '{path.name}' is not lower-case a-z, 0-9, '.', '_' or '-' ending in .md",
                    f"rename it to '{suggest_name(path.stem) or 'notes'}.md'",
                )
            )
            continue
        text = _read(path, root, rel, problems, 524_288)
        if text is not None:
            entry.references[path.name] = Document(rel, text, 1)


def load_entry(folder: Path, root: Path, rules: Rules, problems: list[Diagnostic]) -> Entry:
    entry = Entry(id=folder.relative_to(root).as_posix(), folder=folder)
    load_skill_md(entry, root, rules, problems)
    load_entry_yaml(entry, root, problems)
    load_references(entry, root, problems)
    return entry


# ----------------------------------------------------------------------------------------- eval cases


RowModel = TypeVar("RowModel", EvalCase, TrainingQuestion)


def load_cases(path: Path, display: str) -> tuple[list[EvalCase], list[Diagnostic]]:
    return load_json_lines(path, display, EvalCase, "case", "schemas/eval-case.schema.json")


def load_training(root: Path) -> tuple[list[TrainingQuestion], list[Diagnostic]]:
    """The query classifier's training questions, every file's (none where a file is absent)."""
    questions: list[TrainingQuestion] = []
    problems: list[Diagnostic] = []
    for _, rows, found in load_training_files(root):
        questions += rows
        problems += found
    return questions, problems


def load_training_files(root: Path) -> list[tuple[Path, list[TrainingQuestion], list[Diagnostic]]]:
    """Per training file: its path, its questions and its diagnostics (``validate`` names the file)."""
    schema = "schemas/training-question.schema.json"
    return [
        (path, *load_json_lines(root / path, path.as_posix(), TrainingQuestion, "training", schema))
        for path in TRAINING_FILES
    ]


def load_json_lines(
    path: Path, display: str, model: type[RowModel], code: str, schema: str
) -> tuple[list[RowModel], list[Diagnostic]]:
    """One ``model`` per non-empty line; every bad line is a diagnostic naming its line and field."""
    rows: list[RowModel] = []
    problems: list[Diagnostic] = []
    if not path.exists():
        return rows, problems
    text, problem = read_text(path, 16 * 1_048_576)
    if problem:
        return rows, [_diag(display, None, problem.code, "", problem.message, problem.fix)]
    assert text is not None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            message = f"line is not JSON: {exc.msg}"
            problems.append(_diag(display, number, f"{code}-json", "", message, "write one JSON object per line"))
            continue
        except RecursionError:
            raw = None
        if raw is None or json_depth(raw) > MAX_JSON_DEPTH:
            problems.append(
                _diag(
                    display,
                    number,
                    f"{code}-json",
                    "",
                    f"line nests deeper than {MAX_JSON_DEPTH} levels",
                    f"write one flat JSON object per line (see {schema})",
                )
            )
            continue
        try:
            rows.append(model.model_validate(raw))
        except ValidationError as exc:
            for error in exc.errors():
                fld = ".".join(str(p) for p in error["loc"]) or "(root)"
                msg = error["msg"].removeprefix("Value error, ")
                problems.append(_diag(display, number, f"{code}-schema", fld, msg, f"follow {schema}"))
    return rows, problems


# -------------------------------------------------------------------------------------------- library


def json_depth(value: object) -> int:
    """Nesting depth of parsed JSON, iteratively (a recursive walk could itself overflow)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


def load_library(
    root: Path, cases_file: Path | None = None, with_cases: bool = True
) -> tuple[Library, list[Diagnostic]]:
    """Load everything under ``root``; ``with_cases=False`` skips the eval cases (search never needs them)."""
    root = root.resolve()
    problems: list[Diagnostic] = []
    try:
        rules = load_rules(root)
    except RulesProblem as exc:
        raise SkillkbError([exc.diagnostic]) from None
    manifests, manifest_problems = load_manifests(root)
    problems.extend(manifest_problems)
    entries: dict[str, Entry] = {}
    claimed: dict[str, list[str]] = {}
    folders, tree_problems = scan_entry_tree(root)
    problems.extend(tree_problems)
    problems.extend(scan_docs_tree(root))
    for folder in folders:
        bad_path = entry_path_problem(folder, root)
        if bad_path is not None:
            problems.append(bad_path)
            continue
        entry = load_entry(folder, root, rules, problems)
        entries[entry.id] = entry
        if entry.meta:
            claimed.setdefault(entry.meta.id, []).append(entry.id)
    cases: list[EvalCase] = []
    real: list[EvalCase] = []
    if with_cases:
        cases_path = cases_file or root / CASES_FILE
        display = cases_path.relative_to(root).as_posix() if cases_path.is_relative_to(root) else str(cases_path)
        cases, case_problems = load_cases(cases_path, display)
        problems.extend(case_problems)
        real, real_problems = load_cases(root / REAL_CASES_FILE, REAL_CASES_FILE.as_posix())
        problems.extend(real_problems)
    duplicates = {k: v for k, v in claimed.items() if len(v) > 1}
    return Library(root, rules, entries, manifests, cases, duplicates, real), problems
