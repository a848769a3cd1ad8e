"""Citations in skill bodies: ``[REPO_SHORT@SHA:path#La-Lb]``, resolved against the entry's readsets."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Readset, ReadsetFile

CITATION = re.compile(
    r"\[(?P<repo>[A-Za-z0-9_.-]+)@(?P<sha>[0-9a-fA-F]{4,40}):(?P<path>[^\]\s#]+)#L(?P<start>\d+)(?:-L(?P<end>\d+))?\]"
)
# Anything that looks like an attempt at a citation, to catch malformed ones.
CITATION_LIKE = re.compile(r"\[[A-Za-z0-9_.-]+@[0-9A-Za-z]+:[^\]\s]+\]")
MIN_SHA_PREFIX = 7


@dataclass(frozen=True)
class Citation:
    repo_short: str
    sha: str
    path: str
    start: int
    end: int
    line: int  # line in the Markdown file where it appears
    text: str

    @property
    def label(self) -> str:
        return self.text.strip("[]")

    @classmethod
    def from_match(cls, match: re.Match[str], line: int = 0) -> Citation:
        start = int(match["start"])
        return cls(match["repo"], match["sha"], match["path"], start, int(match["end"] or start), line, match[0])


def find_citations(text: str, first_line: int = 1) -> list[Citation]:
    return [
        Citation.from_match(match, first_line + offset)
        for offset, line in enumerate(text.split("\n"))
        for match in CITATION.finditer(line)
    ]


FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+).+?\1")


def link_citations(
    text: str, readsets: list[Readset], label: Callable[[Citation], str]
) -> tuple[str, list[tuple[Citation, str]]]:
    """Rewrite citations as Markdown links to the pinned upstream lines, outside fenced and inline code.

    Returns the text and the citations left as they were because they do not resolve, with the reason.
    """
    out: list[str] = []
    unresolved: list[tuple[Citation, str]] = []
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or "@" not in line:
            out.append(line)
            continue
        code = [m.span() for m in CODE_SPAN.finditer(line)]

        def replace(match: re.Match[str], code: list[tuple[int, int]] = code) -> str:
            if any(s <= match.start() < e for s, e in code):
                return match[0]
            citation = Citation.from_match(match)
            found = resolve(citation, readsets)
            if isinstance(found, str):
                unresolved.append((citation, found))
                return match[0]
            readset, _file = found
            url = github_url(readset.repo, readset.commit, citation.path, citation.start, citation.end)
            return f"[{label(citation)}]({url})"

        out.append(CITATION.sub(replace, line))
    return "\n".join(out), unresolved


def malformed_citations(text: str, first_line: int = 1) -> list[tuple[int, str]]:
    """Bracketed ``repo@sha:path`` tokens that do not parse as a citation."""
    bad = []
    for offset, line in enumerate(text.split("\n")):
        good_spans = [m.span() for m in CITATION.finditer(line)]
        for match in CITATION_LIKE.finditer(line):
            if not any(s <= match.start() < e for s, e in good_spans):
                bad.append((first_line + offset, match.group(0)))
    return bad


def resolve(citation: Citation, readsets: list[Readset]) -> tuple[Readset, ReadsetFile] | str:
    """The readset file a citation points at, or the reason it does not resolve."""
    if len(citation.sha) < MIN_SHA_PREFIX:
        return f"commit prefix '{citation.sha}' is shorter than {MIN_SHA_PREFIX} hex digits"
    candidates = [r for r in readsets if r.short == citation.repo_short and r.commit.startswith(citation.sha.lower())]
    if not candidates:
        return f"no readset for {citation.repo_short}@{citation.sha}"
    for readset in candidates:
        for file in readset.files:
            if file.path == citation.path:
                return readset, file
    return f"{citation.path} is not a file of the {citation.repo_short}@{citation.sha} readset"


def github_url(repo: str, commit: str, path: str, start: int | None = None, end: int | None = None) -> str:
    url = f"https://github.com/{repo}/blob/{commit}/{path}"
    if start is not None:
        url += f"#L{start}" + (f"-L{end}" if end and end != start else "")
    return url


def count_cited_facts(text: str) -> int:
    """Lines (sentences, bullets, table rows) that carry at least one citation."""
    return sum(1 for line in text.split("\n") if CITATION.search(line))
