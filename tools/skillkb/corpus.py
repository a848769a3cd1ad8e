"""The retrieval corpus: every entry as an entry card plus its sections (SKILL.md and references).

A *card* carries the entry-level fields (title, title_zh, description, keywords en/zh); a *section* is
the text under one heading with its heading path. Field weighting is done by repeating fields (a cheap,
measurable stand-in for BM25F): see ``FieldWeights``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .citations import CITATION

if TYPE_CHECKING:
    from .loader import Entry, Library


@dataclass(frozen=True)
class FieldWeights:
    """How many times each field is repeated in the indexed text (0 drops it)."""

    title: int = 2
    description: int = 1
    keywords: int = 2
    heading: int = 2
    body: int = 1
    card_in_sections: int = 0  # copies of the title inside every section document

    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(asdict(self).items()))


DEFAULT_WEIGHTS = FieldWeights()
BODY_OFF = FieldWeights(body=0, heading=0)  # cards only: what a catalogue-only retriever would see
CARD_OFF = FieldWeights(title=0, description=0, keywords=0)  # sections only


@dataclass(frozen=True)
class Doc:
    """One retrievable unit."""

    entry_id: str
    kind: str  # "card" or "section"
    section: str  # anchor of the section ("card" for cards)
    heading: str
    path: str  # file the text lives in
    title: str
    text: str  # text shown as a snippet
    index_text: str  # text the retriever indexes (fields repeated per weights)
    tier: int
    fields: dict[str, str] = field(default_factory=dict)  # the indexed fields by name, for --explain
    not_for: str = ""  # cards only: the entry's "Not this entry" list, shown with a hit, never indexed


def _strip_citations(text: str) -> str:
    """Citations name files and lines; keep their file names (useful words), drop the SHA noise."""
    return CITATION.sub(lambda m: f" {m['path'].replace('/', ' ')} ", text)


def _repeat(text: str, times: int) -> str:
    return "\n".join([text] * times)


NOT_THIS_ENTRY = "not this entry"  # the SKILL.md heading over the neighbours that take what this one does not


def not_this_entry(entry: Entry) -> str:
    """The SKILL.md body's "Not this entry" list (which neighbouring entry takes which nearby question), so
    that whoever reads a hit can tell it from its neighbours; "" when the entry has none."""
    for section in entry.sections():
        if section.file == entry.skill_path and section.heading.strip().lower() == NOT_THIS_ENTRY:
            return section.text.strip()
    return ""


def entry_docs(entry: Entry, weights: FieldWeights = DEFAULT_WEIGHTS) -> list[Doc]:
    meta = entry.meta
    assert meta is not None
    titles = f"{meta.title}\n{meta.title_zh}"
    keywords = " ".join(meta.keywords.en + meta.keywords.zh)
    card_text = "\n".join(
        part
        for part in (
            _repeat(titles, weights.title),
            _repeat(entry.description, weights.description),
            _repeat(keywords, weights.keywords),
        )
        if part
    )
    docs = []
    if card_text.strip():
        docs.append(
            Doc(
                entry.id,
                "card",
                "card",
                meta.title,
                entry.skill_path,
                meta.title,
                entry.description,
                card_text,
                meta.tier,
                {"title": titles, "description": entry.description, "keywords": keywords},
                not_this_entry(entry),
            )
        )
    for section in entry.sections():
        if section.level == 1 and not section.text.strip():
            continue
        body = _strip_citations(section.text)
        index_text = "\n".join(
            part
            for part in (
                _repeat(" ".join(section.heading_path), weights.heading),
                _repeat(body, weights.body),
                _repeat(meta.title, weights.card_in_sections),
            )
            if part
        )
        if index_text.strip():
            docs.append(
                Doc(
                    entry.id,
                    "section",
                    section.anchor,
                    section.heading,
                    section.file,
                    meta.title,
                    section.text,
                    index_text,
                    meta.tier,
                    {"heading": " / ".join(section.heading_path), "body": body},
                )
            )
    return docs


def build_corpus(library: Library, weights: FieldWeights = DEFAULT_WEIGHTS) -> list[Doc]:
    return [doc for entry in library.sorted_entries() if entry.meta is not None for doc in entry_docs(entry, weights)]


def phrase_corpus(library: Library) -> list[tuple[str, str]]:
    """(entry id, phrase) for every phrasing of every entry: each phrase is one tiny document, so a short
    question is scored against the one phrase it resembles, not diluted by a long card."""
    return [
        (entry.id, phrase)
        for entry in library.sorted_entries()
        if entry.meta is not None
        for phrase in entry.meta.phrasings.en + entry.meta.phrasings.zh
    ]


def corpus_fingerprint(root: Path, extra: str = "") -> str:
    """A cheap fingerprint of the library's text: path, size and mtime of every entry file.

    Cheap enough to run on every search (no parsing), and it changes as soon as an entry is edited.
    """
    digest = hashlib.sha256(extra.encode())
    for top in ("hardware", "repositories"):
        for path in sorted((root / top).rglob("*")) if (root / top).is_dir() else []:
            if path.suffix in (".md", ".yaml") and path.is_file():
                stat = path.stat()
                digest.update(f"{path.relative_to(root).as_posix()}|{stat.st_size}|{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]
