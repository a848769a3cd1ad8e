"""Text helpers for agent-facing output (MCP server, export): citations as links, sections as blocks."""

from __future__ import annotations

from dataclasses import dataclass

from .citations import Citation, find_citations, github_url, resolve
from .citations import link_citations as shared_link_citations
from .loader import Document, Section, split_sections
from .models import Readset


def citation_url(citation: Citation, readsets: list[Readset]) -> str | None:
    """The upstream link at the pinned full commit, or None when the citation does not resolve."""
    found = resolve(citation, readsets)
    if isinstance(found, str):
        return None
    readset, _file = found
    return github_url(readset.repo, readset.commit, citation.path, citation.start, citation.end)


def citation_label(citation: Citation) -> str:
    """Short link text: the file name and its lines, e.g. ``acl_graph.py#L28-L46``."""
    lines = f"#L{citation.start}" + (f"-L{citation.end}" if citation.end != citation.start else "")
    return citation.path.rsplit("/", 1)[-1] + lines


def link_citations(text: str, readsets: list[Readset]) -> tuple[str, list[str]]:
    """Citations as plain links named by file and lines; returns the text and the labels left unresolved."""
    linked, unresolved = shared_link_citations(text, readsets, citation_label)
    return linked, [citation.label for citation, _reason in unresolved]


def citation_links(text: str, readsets: list[Readset]) -> list[dict[str, str]]:
    """Each distinct citation in ``text`` with its upstream link, in order of first appearance."""
    seen: dict[str, dict[str, str]] = {}
    for citation in find_citations(text):
        if citation.label not in seen:
            seen[citation.label] = {"citation": citation.label, "url": citation_url(citation, readsets) or ""}
    return list(seen.values())


@dataclass(frozen=True)
class Block:
    """A section with its subsections, cut verbatim from the file."""

    anchor: str
    heading: str
    level: int
    text: str


def section_blocks(entry_id: str, doc: Document) -> list[Block]:
    """One block per section: from its heading to the next heading of the same or a higher level."""
    sections: list[Section] = split_sections(entry_id, doc)
    lines = doc.text.split("\n")
    blocks = []
    for i, section in enumerate(sections):
        end = len(lines)
        for later in sections[i + 1 :]:
            if section.level == 0 or later.level <= section.level:
                end = later.start_line - doc.first_line
                break
        start = section.start_line - doc.first_line
        text = "\n".join(lines[start:end]).strip("\n") + "\n"
        blocks.append(Block(section.anchor, section.heading, section.level, text))
    return blocks


def find_block(blocks: list[Block], key: str) -> Block | None:
    """A block by anchor (exact), else by heading (case-insensitive, leading '#'s ignored)."""
    wanted = key.strip().lstrip("#").strip()
    for block in blocks:
        if block.anchor == wanted:
            return block
    folded = wanted.casefold()
    for block in blocks:
        if block.heading.casefold() == folded:
            return block
    return None
