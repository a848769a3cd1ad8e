"""Query-side signals for ranking and abstention: what a real user's question carries besides words.

- ``Lexicon`` (``schemas/retrieval-scope.yaml``): the library's domain and foreign-stack terms, noise
  terms (model families and the like, which dominate titles but say nothing about the cause), topics
  the library knows it does not cover, and zh↔en term bridges.
- ``weighted_query``: the query cleaned of log prefixes, timestamps, paths, hex, versions and sizes
  (error codes and API names stay), tokenised, noise down-weighted, bridged terms added at a lower
  weight. BM25 then scores a weighted bag of tokens.
- ``SignatureIndex``: the exact error strings and codes of every entry's triage table (the symptom
  column), so a pasted log line that matches one is a strong, specific signal for that entry.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .diagnostics import Diagnostic
from .tokenize import tokenize

if TYPE_CHECKING:
    from .loader import Entry

LEXICON_FILE = Path("schemas/retrieval-scope.yaml")
NOISE_WEIGHT = 0.25  # model families, sizes' leftovers: kept (they sometimes matter) but barely count
BRIDGE_WEIGHT = 0.5  # a bridged term counts half of a term the user typed

# Parts of a pasted log or title that never say what went wrong.
LOG_PREFIX = re.compile(
    r"\((?:EngineCore|Worker|APIServer|VllmWorker|RayWorker|pid)[^)]{0,80}\)"
    r"|\b(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s+\d{2}-\d{2}\s+[\d:.]+\s*(?:\[[^\]]{0,80}\])?"
    r"|\[(?:rank|RANK)\d+\]:?|\bpid=\d+|\[PID:\s*\d+\]|\bPID:\d+|\bDevice:\d+|\bRankID:-?\d+"
)
TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[ T-]\d{2}[:.-]\d{2}(?:[:.-]\d{2})?(?:[.,]\d+)?)?\b|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.+@-]+){2,}/?")
HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,40}\b")
VERSION = re.compile(r"\bv?\d+(?:\.\d+)+(?:[._-]?(?:rc|post|dev|a|b)\d*)*(?:\+\w+)?\b|\b\d+\.\d+\.[Rr][Cc]\d+\b")
SIZE = re.compile(r"\b(?!910[bBcC]\b)\d+(?:\.\d+)?\s?(?:[KMGTP]i?B|[KMGT]|[bB])\b")
ERROR_CODE = re.compile(r"\b(?:[1-5]\d{5}|E[A-Z]\d{4}|ERR\d{5}|0x[0-9A-Fa-f]{7,8})\b")
PLACEHOLDER = re.compile(r"\.\.\.|…|%[sdifrxl]+|\{[^}]*\}|<[^>]*>|\b[NX]\b|\*+")
CODE_SPAN = re.compile(r"`([^`]+)`")
CITATION_TAIL = re.compile(r"\[[A-Za-z0-9_.-]+@[0-9a-f]{4,40}:[^\]]+\]")
MIN_FRAGMENT = 12  # shorter literal pieces of an error string match too much by chance


@dataclass(frozen=True)
class Lexicon:
    domain: frozenset[str] = frozenset()
    foreign: frozenset[str] = frozenset()
    noise: frozenset[str] = frozenset()
    generic: frozenset[str] = frozenset()  # exact tokens every question carries (the stack, "deploy", "error")
    uncovered: tuple[str, ...] = ()  # phrases (matched on the folded query text)
    # (phrase, the tokens of its translation), both directions; tokenised once when the lexicon is built, so an
    # English query never loads the Chinese segmenter to translate a bridge
    bridges: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # What the library does not answer, in words, for whoever reads a result (the MCP tool's description):
    # a reader declines a near hit only if it knows where the library stops.
    not_covered: tuple[str, ...] = ()

    @classmethod
    def load(cls, root: Path) -> tuple[Lexicon, list[Diagnostic]]:
        """The lexicon of ``schemas/retrieval-scope.yaml``; an unreadable or malformed file gives an empty
        lexicon and a diagnostic (search still serves, with less help), never a traceback or a hang."""
        from .fsutil import read_text
        from .yamlsrc import YamlProblem, parse_yaml

        path = root / LEXICON_FILE
        shown = LEXICON_FILE.as_posix()
        if not path.exists() and not path.is_symlink():
            return cls(), []
        text, problem = read_text(path)
        if problem is not None:
            return cls(), [Diagnostic(shown, None, problem.code, "", problem.message, problem.fix)]
        try:
            raw = parse_yaml(text or "").data
        except YamlProblem as exc:
            return cls(), [Diagnostic(shown, exc.line, "scope-yaml", "", str(exc), "fix the YAML syntax")]
        problems = _lexicon_shape(raw, shown)
        if problems:
            return cls(), problems
        lower = lambda key: frozenset(str(t).lower() for t in raw.get(key) or ())  # noqa: E731
        pairs = [(str(a).lower(), str(b).lower()) for a, bs in (raw.get("bridges") or {}).items() for b in bs]
        bridges = tuple((phrase, tuple(tokenize(translation))) for phrase, translation in pairs)
        lexicon = cls(
            lower("domain_terms"),
            lower("foreign_terms"),
            lower("noise_terms"),
            lower("generic_terms"),
            tuple(str(t).lower() for t in raw.get("uncovered_terms") or ()),
            bridges,
            tuple(str(t) for t in raw.get("not_covered") or ()),
        )
        return lexicon, []

    def to_json(self) -> dict:
        return {
            "domain": sorted(self.domain),
            "foreign": sorted(self.foreign),
            "noise": sorted(self.noise),
            "generic": sorted(self.generic),
            "uncovered": list(self.uncovered),
            "bridges": [[phrase, list(tokens)] for phrase, tokens in self.bridges],
            "not_covered": list(self.not_covered),
        }

    @classmethod
    def from_json(cls, data: dict) -> Lexicon:
        return cls(
            frozenset(data["domain"]),
            frozenset(data["foreign"]),
            frozenset(data["noise"]),
            frozenset(data["generic"]),
            tuple(data["uncovered"]),
            tuple((phrase, tuple(tokens)) for phrase, tokens in data["bridges"]),
            tuple(data["not_covered"]),
        )


LIST_KEYS = ("domain_terms", "foreign_terms", "noise_terms", "generic_terms", "uncovered_terms", "not_covered")


def _lexicon_shape(raw: object, shown: str) -> list[Diagnostic]:
    """Lists of strings under the list keys, and ``bridges`` mapping a phrase to a list of strings."""

    def bad(field: str, message: str, fix: str) -> Diagnostic:
        return Diagnostic(shown, None, "scope-shape", field, message, fix)

    if not isinstance(raw, dict):
        return [bad("", "the file is not a mapping", f"write the keys {', '.join(LIST_KEYS)} and bridges")]
    out = []
    for key in LIST_KEYS:
        value = raw.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, (str, int)) for v in value)):
            out.append(bad(key, "is not a list of terms", "write a YAML list of strings"))
    bridges = raw.get("bridges")
    lists = isinstance(bridges, dict) and all(
        isinstance(v, list) and all(isinstance(t, str) for t in v) for v in bridges.values()
    )
    if bridges is not None and not lists:
        out.append(bad("bridges", "is not a mapping of a phrase to a list of translations", "write `phrase: [term]`"))
    return out


def fold(text: str) -> str:
    """NFKC, case-folded, white space collapsed: how queries and signatures are compared."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def strip_noise(query: str) -> str:
    """The query without log prefixes, timestamps, paths (their last part is kept), hex, versions, sizes."""
    text = LOG_PREFIX.sub(" ", query)
    text = TIMESTAMP.sub(" ", text)
    text = PATH.sub(lambda m: " " + m[0].rstrip("/").rsplit("/", 1)[-1] + " ", text)
    codes = ERROR_CODE.findall(text)
    text = HEX.sub(" ", text)
    text = SIZE.sub(" ", text)
    text = VERSION.sub(" ", text)
    return " ".join([*text.split(), *(c for c in codes if c.lower().startswith("0x"))])


@dataclass
class WeightedQuery:
    tokens: list[str]  # what BM25 looks up (duplicates kept)
    weights: list[float]  # one per token
    folded: str  # the cleaned query, folded, for phrase and signature matching
    raw_folded: str  # the whole query as typed, folded

    def distinct(self) -> set[str]:
        return set(self.tokens)


ACTIVE_PARAMS = re.compile(r"^a\d+(?:\.\d+)?b$")  # MoE "A22B"-style active-parameter counts


def is_noise(token: str, lexicon: Lexicon) -> bool:
    """Model families (and names built on them), the stack's generic words, short bare numbers, active-parameter
    counts."""
    if token in lexicon.generic:
        return True
    if token.isdigit():
        return len(token) <= 4
    if ACTIVE_PARAMS.match(token):
        return True
    return token[:1].isalpha() and any(token.startswith(n) for n in lexicon.noise if len(n) > 2 or token == n)


def weighted_query(query: str, lexicon: Lexicon) -> WeightedQuery:
    cleaned = strip_noise(query)
    tokens = tokenize(cleaned)
    weights = [NOISE_WEIGHT if is_noise(t, lexicon) else 1.0 for t in tokens]
    folded = fold(cleaned)
    seen = set(tokens)
    for phrase, translated in lexicon.bridges:
        if phrase in folded:
            for token in translated:
                if token not in seen:
                    tokens.append(token)
                    weights.append(BRIDGE_WEIGHT)
                    seen.add(token)
    return WeightedQuery(tokens, weights, folded, fold(query))


# ------------------------------------------------------------------------------------- signatures


def triage_symptoms(entry: Entry) -> list[str]:
    """The first cell of every data row of the entry's ``## Triage`` table (SKILL.md)."""
    for section in entry.sections():
        if section.level == 2 and section.heading.strip().lower() == "triage" and section.file == entry.skill_path:
            cells = []
            for line in section.text.split("\n"):
                if line.strip().startswith("|") and not re.fullmatch(r"\s*\|[\s:|-]+\|?\s*", line):
                    parts = re.split(r"(?<!\\)\|", line.strip().strip("|"))
                    cells.append(parts[0].strip() if parts else "")
            return cells[1:]  # minus the header row
    return []


def signature_fragments(symptom: str) -> list[str]:
    """Literal pieces of the error strings in a symptom cell, long enough to be specific."""
    symptom = CITATION_TAIL.sub(" ", symptom)
    spans = CODE_SPAN.findall(symptom) or [symptom]
    out = []
    for span in spans:
        for piece in PLACEHOLDER.split(span):
            piece = fold(piece).strip(" .,:;'\"()[]")
            if len(piece) >= MIN_FRAGMENT and re.search(r"[a-z\u4e00-\u9fff]", piece):
                out.append(piece)
    return out


@dataclass
class SignatureIndex:
    fragments: dict[str, list[str]] = field(default_factory=dict)  # folded fragment -> entry ids
    codes: dict[str, list[str]] = field(default_factory=dict)  # error code -> entry ids

    @classmethod
    def build(cls, entries: list[Entry]) -> SignatureIndex:
        index = cls()
        for entry in entries:
            symptoms = triage_symptoms(entry)
            for symptom in symptoms:
                for fragment in signature_fragments(symptom):
                    ids = index.fragments.setdefault(fragment, [])
                    if entry.id not in ids:
                        ids.append(entry.id)
                for code in ERROR_CODE.findall(CITATION_TAIL.sub(" ", symptom)):
                    ids = index.codes.setdefault(code.lower(), [])
                    if entry.id not in ids:
                        ids.append(entry.id)
        return index

    def to_json(self) -> dict:
        return {"fragments": self.fragments, "codes": self.codes}

    @classmethod
    def from_json(cls, data: dict) -> SignatureIndex:
        return cls(data["fragments"], data["codes"])

    def match(self, raw_folded: str) -> dict[str, list[str]]:
        """entry id -> the signatures (fragments and codes) of its triage table the query contains."""
        found: dict[str, list[str]] = {}
        for fragment, ids in self.fragments.items():
            if fragment in raw_folded:
                for entry_id in ids:
                    found.setdefault(entry_id, []).append(fragment)
        for code in {c.lower() for c in ERROR_CODE.findall(raw_folded.upper())} | set(
            re.findall(r"\b\d{6}\b", raw_folded)
        ):
            for entry_id in self.codes.get(code, []):
                found.setdefault(entry_id, []).append(code)
        return found

    def scores(self, raw_folded: str) -> dict[str, float]:
        """Specificity-weighted signature evidence per entry: long fragments and codes unique to one entry
        count most."""
        out: dict[str, float] = {}
        for entry_id, hits in self.match(raw_folded).items():
            total = 0.0
            for hit in hits:
                owners = len(self.fragments.get(hit) or self.codes.get(hit) or [entry_id])
                length = min(len(hit), 60) / 30 if hit in self.fragments else 1.0
                total += length / owners
            out[entry_id] = total
        return out
