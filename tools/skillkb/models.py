"""Pydantic models: the single source of truth for every file format the library reads or writes.

The JSON Schemas in ``schemas/`` are generated from these models (``skillkb schemas``) and a test
regenerates and compares them, so the two cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

SHA40 = r"^[0-9a-f]{40}$"
ENTRY_ID = r"^(hardware|repositories)(/[a-z0-9]+(-[a-z0-9]+)*)+$"
SKILL_NAME = r"^[a-z0-9]+(-[a-z0-9]+)*$"
REPO = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"
THREAD_URL = r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/(issues|pull|discussions)/[0-9]+$"
THREAD_PARTS = re.compile(r"github\.com/([^/\s]+)/([^/\s]+)/(?:issues|pull|discussions)/(\d+)", re.I)
LINE_RANGES = r"^[1-9][0-9]*-[1-9][0-9]*(, *[1-9][0-9]*-[1-9][0-9]*)*$"
ROUND_TAG = re.compile(r"round(\d+)")  # a real question's collection round, from round 3 on (README)


def round_tags(tags: Iterable[str]) -> list[str]:
    """The collection-round tags among ``tags`` (``round3``, ``round4`` ...), oldest first."""
    numbers = {t: int(m[1]) for t in tags if (m := ROUND_TAG.fullmatch(t))}
    return sorted(numbers, key=numbers.__getitem__)


def newest_round(tags: Iterable[str]) -> str | None:
    """The latest collection round present: its test questions are the fresh ones, collected after every
    choice that came before them."""
    rounds = round_tags(tags)
    return rounds[-1] if rounds else None


def thread_key(url: str) -> tuple[str, str, str] | str:
    """One key per GitHub thread: issues, pull requests and discussions share a repository's number space,
    and owner and repository names are case-insensitive."""
    match = THREAD_PARTS.search(url)
    return (match[1].lower(), match[2].lower(), match[3]) if match else url.strip().lower()


# Branch names are never pins: they move. Tags and full commits do not.
BRANCH_NAMES = re.compile(r"^(main|master|develop|dev|trunk|head|releases?/.*|release-.*|branch-.*)$", re.I)


def check_sha(value: str) -> str:
    """A pinned commit or blob is exactly 40 lower-case hex digits."""
    if re.fullmatch(SHA40, value):
        return value
    if BRANCH_NAMES.match(value):
        raise ValueError(f"'{value}' is a branch name; pin the full 40-hex commit (put a tag in 'tag')")
    if re.fullmatch(r"[0-9a-fA-F]{4,39}", value):
        raise ValueError(f"'{value}' is a short SHA ({len(value)} hex digits); write all 40 hex digits")
    if re.fullmatch(r"[0-9A-F]{40}", value, re.I):
        raise ValueError(f"'{value}' has upper-case hex; write it in lower case")
    raise ValueError(f"'{value}' is not a 40-hex SHA")


Sha = Annotated[str, AfterValidator(check_sha), WithJsonSchema({"type": "string", "pattern": SHA40})]
EntryId = Annotated[str, StringConstraints(pattern=ENTRY_ID, max_length=200)]
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


def check_title(value: str) -> str:
    """Titles become navigation labels and the page <title>, where themes render them as raw HTML."""
    if re.search(r"[<>\x00-\x1f\x7f]", value):
        raise ValueError("a title may not contain '<', '>', line breaks or control characters")
    return value


Title = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, strip_whitespace=True),
    AfterValidator(check_title),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^<>\\u0000-\\u001f\\u007f]+$"}),
]


# Topic names the site uses for its own pages under topics/: 'index' is the Topics overview.
RESERVED_TOPICS = ("index",)


def check_topic(value: str) -> str:
    """A topic becomes the page topics/NAME, so it may not take a name the site's own pages use."""
    if value in RESERVED_TOPICS:
        raise ValueError(f"topic '{value}' is reserved (topics/{value} is the Topics overview page); choose another")
    return value


Topic = Annotated[str, StringConstraints(pattern=SKILL_NAME, max_length=64), AfterValidator(check_topic)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_ref(value: str) -> str:
    """A version reference is a tag or release version, or a full 40-hex commit; never a branch or short SHA."""
    if BRANCH_NAMES.match(value):
        raise ValueError(f"'{value}' is a branch name; pin a tag or a 40-hex commit instead")
    if re.fullmatch(r"[0-9a-f]{7,39}", value) and not re.fullmatch(r"[0-9.]+", value):
        raise ValueError(f"'{value}' looks like a short SHA; write the full 40-hex commit")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", value):
        raise ValueError(f"'{value}' is not a tag, a release version or a 40-hex commit")
    return value


# --------------------------------------------------------------------------------------------- entry


class Status(StrEnum):
    candidate = "candidate"
    to_refine = "to-refine"
    covered = "covered"
    deferred = "deferred"


class ValidationState(StrEnum):
    """Empirical validation, ordered from weakest to strongest evidence."""

    not_run = "not_run"
    smoke_tested = "smoke_tested"  # the mechanism ran once on real hardware
    reproduced = "reproduced"  # the entry's triage rows were reproduced on real hardware
    validated = "validated"  # reproduced and re-checked on the anchored versions


class Relation(StrEnum):
    builds_on = "builds-on"
    see_also = "see-also"
    not_this = "not-this"


class StatusInfo(Strict):
    state: Status
    reason: str | None = Field(None, description="Why the entry is deferred or still to refine")

    @model_validator(mode="after")
    def _reason_for_deferred(self) -> StatusInfo:
        if self.state in (Status.deferred, Status.to_refine) and not (self.reason or "").strip():
            raise ValueError(f"status '{self.state.value}' needs a non-empty 'reason'")
        return self


class EmpiricalValidation(Strict):
    state: ValidationState
    evidence: NonEmpty = Field(
        description="For not_run: what evidence would raise the state. Otherwise: what ran, where, with which log."
    )
    hardware: str | None = Field(None, description="Device and driver the evidence came from (above not_run)")
    date: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$")

    @model_validator(mode="after")
    def _hardware_when_run(self) -> EmpiricalValidation:
        if self.state != ValidationState.not_run and not (self.hardware and self.date):
            raise ValueError(f"empirical validation '{self.state.value}' needs 'hardware' and 'date'")
        return self


class VersionAnchor(Strict):
    ref: str = Field(description="Release tag or version (e.g. v0.25.1rc1, 9.0.1, 2.10.0.post2) or 40-hex commit")
    commit: Sha | None = Field(None, description="The commit the tag resolves to, where known")

    @field_validator("ref")
    @classmethod
    def _ref_is_pin(cls, value: str) -> str:
        return check_ref(value)


class VersionAnchors(Strict):
    vllm_ascend: VersionAnchor | None = None
    vllm: VersionAnchor | None = None
    cann: VersionAnchor | None = None
    torch: VersionAnchor | None = None
    torch_npu: VersionAnchor | None = None


class ReadsetFile(Strict):
    path: str = Field(description="Path inside the upstream repository: relative, normalised, no '..'")
    blob: Sha = Field(description="git blob SHA of the file at the readset's commit")
    lines: Annotated[str, StringConstraints(pattern=LINE_RANGES)] = Field(
        description="Line ranges actually read, e.g. '1-120, 200-260'"
    )
    scope: NonEmpty = Field(description="What was read and why, in a few words")

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        problem = path_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    def ranges(self) -> list[tuple[int, int]]:
        return parse_ranges(self.lines)


class Readset(Strict):
    repo: Annotated[str, StringConstraints(pattern=REPO)] = Field(description="Upstream repository owner/name")
    commit: Sha
    tag: str | None = Field(None, description="Tag that resolves to this commit, if any")
    files: list[ReadsetFile] = Field(min_length=1)

    @field_validator("tag")
    @classmethod
    def _tag_not_branch(cls, value: str | None) -> str | None:
        return None if value is None else check_ref(value)

    @property
    def short(self) -> str:
        """The repository's short name used in citations, e.g. 'vllm-ascend'."""
        return self.repo.split("/", 1)[1]


class CrossRef(Strict):
    id: EntryId
    relation: Relation
    note: str | None = None


class Keywords(Strict):
    en: list[NonEmpty] = Field(min_length=1)
    zh: list[NonEmpty] = Field(min_length=1)


class Phrasings(Strict):
    """How users describe the problems an entry answers: symptoms in plain words, not identifiers."""

    en: list[NonEmpty] = Field(default_factory=list)
    zh: list[NonEmpty] = Field(default_factory=list)


class EntryMeta(Strict):
    """``entry.yaml``: provenance, ownership and admission state of one skill entry."""

    id: EntryId = Field(description="Path of the entry folder from the repository root")
    title: Title
    title_zh: Title
    tier: Literal[1, 2, 3] = Field(
        description="1 generic vLLM mechanism; 2 vLLM Ascend plugin feature; 3 Ascend/CANN/torch_npu constraint"
    )
    owner: Annotated[str, StringConstraints(pattern=r"^(hardware|repositories)(/[a-z0-9-]+)+$")] = Field(
        description="Canonical owner path (e.g. hardware/ascend); the entry folder lives directly under it"
    )
    topics: list[Topic] = Field(
        default_factory=list, description="Navigation topics for the site: kebab-case, each becomes topics/NAME"
    )
    status: StatusInfo
    empirical_validation: EmpiricalValidation
    version_anchors: VersionAnchors
    readsets: list[Readset] = Field(default_factory=list)
    cross_refs: list[CrossRef] = Field(default_factory=list)
    keywords: Keywords
    phrasings: Phrasings = Field(
        default_factory=Phrasings,
        description="Symptoms as users put them, in the library's own words (never copied from a thread); each "
        "phrase is matched on its own by search, so a short question that says it finds this entry",
    )


# ------------------------------------------------------------------------------------------ helpers


def path_problem(value: str) -> str | None:
    """Why a repository-relative path is unsafe, or None when it is fine."""
    if not value or value.strip() != value:
        return "path is empty or has surrounding spaces"
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        return f"'{value}' is absolute; write it relative to the repository root"
    parts = value.replace("\\", "/").split("/")
    if ".." in parts:
        return f"'{value}' climbs out with '..'; write the normalised path inside the repository"
    if any(p in ("", ".") for p in parts):
        return f"'{value}' is not normalised (empty or '.' segment)"
    if re.search(r"[`|<>\x00-\x1f\x7f]", value):
        return f"'{value}' holds a backtick, '|', '<', '>' or a control character"
    return None


def parse_ranges(text: str) -> list[tuple[int, int]]:
    ranges = []
    for chunk in text.split(","):
        start, end = (int(x) for x in chunk.strip().split("-"))
        ranges.append((start, end))
    return ranges


# ---------------------------------------------------------------------------------------- manifest


class ManifestRow(Strict):
    """One row of ``sources/manifests/OWNER__NAME@COMMIT.tsv``."""

    path: str
    blob: Sha
    bytes: int = Field(ge=0)
    lines: int = Field(ge=0, description="Newline count, plus one for a last line without a newline")


# ------------------------------------------------------------------------------------------- index


class ReadsetSummary(Strict):
    repo: str
    commit: Sha
    tag: str | None
    files: int
    evidence: Literal["verified", "artifact", "partial", "unverified"] = Field(
        description="verified: a full git-tree manifest lists every file with its blob; artifact: a published "
        "release artifact's full listing does; partial: only single stored copies; unverified: no match"
    )


class IndexEntry(Strict):
    id: EntryId
    name: Annotated[str, StringConstraints(pattern=SKILL_NAME, max_length=64)]
    title: str
    title_zh: str
    description: str
    tier: Literal[1, 2, 3]
    owner: str
    status: Status
    status_reason: str | None
    validation: ValidationState
    version_anchors: dict[str, VersionAnchor]
    readsets: list[ReadsetSummary]
    cross_refs: list[CrossRef]
    keywords: Keywords
    path: str = Field(description="Path of SKILL.md from the repository root")
    references: list[str]
    digest: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]


class SkillIndex(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(alias="$schema")
    version: Literal[1] = 1
    entries: list[IndexEntry]


# -------------------------------------------------------------------------------------- eval cases


class EvalCase(Strict):
    """One line of ``evals/retrieval/cases.jsonl``."""

    id: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    query: NonEmpty
    expected: list[EntryId] = Field(description="Ids that answer the query; empty = out of scope")
    acceptable: list[EntryId] = Field(default_factory=list)
    negatives: list[EntryId] = Field(default_factory=list)
    lang: Literal["en", "zh", "mixed"]
    split: Literal["dev", "test"] = "test"
    tags: list[NonEmpty] = Field(default_factory=list)
    origin: Literal["authored", "real"] = Field(
        "authored", description="authored: written for the eval; real: copied from a public thread, never rewritten"
    )
    source: Annotated[str, StringConstraints(pattern=THREAD_URL)] | None = Field(
        None, description="For real cases: the thread the question was copied from (one question per thread)"
    )
    rationale: NonEmpty | None = Field(
        None, description="For real cases: what in the thread decided the label (or 'labelled from the body')"
    )

    @model_validator(mode="after")
    def _disjoint(self) -> EvalCase:
        overlap = set(self.expected) & set(self.negatives)
        if overlap:
            raise ValueError(f"ids both expected and negative: {sorted(overlap)}")
        if self.origin == "real" and not (self.source and self.rationale):
            raise ValueError("a real case needs 'source' (the thread URL) and 'rationale' (what decided the label)")
        return self


class TrainingQuestion(Strict):
    """One line of the query classifier's training files (``evals/retrieval/training/``): never scored.

    ``written``: a question written from an entry in the library's own words; ``judged``: a real thread's
    title, copied, whose label an independent judge gave from the title alone; ``thread``: a real thread's
    title, copied, labelled by the root cause its thread shows, as the real eval cases are (``source`` is the
    thread, ``rationale`` what in it decided the label)."""

    text: Annotated[str, StringConstraints(min_length=1, max_length=2000, strip_whitespace=True)]
    label: Annotated[str, StringConstraints(pattern=rf"^(none|{ENTRY_ID.strip('^$')})$", max_length=200)] = Field(
        description="The id of the entry that answers it, or 'none' (an in-domain question no entry covers)"
    )
    lang: Literal["en", "zh", "mixed"]
    origin: Literal["written", "judged", "thread"] = "written"
    source: Annotated[str, StringConstraints(pattern=THREAD_URL)] | None = Field(
        None, description="For real titles (judged, thread): the thread the title was copied from"
    )
    rationale: Annotated[str, StringConstraints(min_length=1, max_length=400, strip_whitespace=True)] | None = Field(
        None, description="For thread-labelled titles: what in the thread decided the label"
    )

    @model_validator(mode="after")
    def _sourced(self) -> TrainingQuestion:
        if (self.origin != "written") != bool(self.source):
            raise ValueError("a real title (judged, thread) needs 'source' (its thread); a written one has none")
        if (self.origin == "thread") != bool(self.rationale):
            raise ValueError("a thread-labelled title needs 'rationale' (what decided the label); others have none")
        return self


SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "entry.schema.json": EntryMeta,
    "skill-index.schema.json": SkillIndex,
    "eval-case.schema.json": EvalCase,
    "training-question.schema.json": TrainingQuestion,
    "manifest-row.schema.json": ManifestRow,
}
