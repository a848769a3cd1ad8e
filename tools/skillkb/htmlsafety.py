"""What HTML and which link targets may reach the site: allow-lists, never deny-lists.

Two checks, one per end of the pipeline:

- ``source_problems``: raw HTML in an entry's Markdown (outside code) must be one of a few formatting
  tags with no attributes at all, and every link target must use an allowed scheme once HTML entities
  and white space are undone (``java&#115;cript:`` is ``javascript:``). ``skillkb validate`` reports
  these; ``skillkb docs build`` refuses a library that has any.
- ``rendered_problems``: the HTML mkdocs renders for each page is parsed and every tag, attribute and
  URL is checked against what Markdown, its extensions and Material produce. It guards the site against
  anything the source check missed.

Values from ``entry.yaml`` (titles, topics, notes, evidence …) are never markup: ``md_text`` escapes
them for Markdown, ``html_text`` for HTML.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

# Raw HTML an entry may write in its Markdown: inline formatting only, and never with attributes.
SOURCE_TAGS = frozenset({"br", "sub", "sup", "kbd", "b", "i", "em", "strong", "code", "s", "del", "ins", "mark"})
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# Anything the Markdown renderer could pass through as raw HTML: tags, comments, declarations, PIs.
RAW_HTML = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)((?:\s[^<>]*)?)/?>|<!--|<![A-Za-z\[]|<\?")
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]*:[^<>\s]*)>")
MD_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?[^)]*\)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)

# What the rendered pages may contain (Python-Markdown, pymdownx, Material's page content).
RENDERED_TAGS = frozenset(
    """a abbr b blockquote br caption code col colgroup dd del details div dl dt em figcaption figure h1 h2 h3 h4
    h5 h6 hr i img input ins kbd label li mark ol p pre s small span strong sub summary sup table tbody td tfoot
    th thead tr u ul svg path g rect line circle polyline polygon text title defs clippath use""".split()
)
RENDERED_ATTRS = frozenset(
    """class id href src alt title colspan rowspan align width height open type checked disabled name for
    tabindex role lang dir viewbox xmlns xmlns:xlink d fill stroke stroke-width stroke-linecap stroke-linejoin
    transform x y x1 y1 x2 y2 cx cy r points font-size font-family text-anchor clip-path version
    preserveaspectratio data-md-component aria-hidden aria-label""".split()
)
URL_ATTRS = frozenset({"href", "src", "xlink:href"})
SAFE_STYLE = re.compile(r"^\s*text-align:\s*(left|right|center)\s*;?\s*$")
INPUT_TYPES = frozenset({"checkbox", "radio"})  # pymdownx tasklists and tabbed blocks


def normalised_url(target: str) -> str:
    """The URL a browser would act on: entities decoded (repeatedly), white space and controls removed."""
    text = target
    for _ in range(3):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return re.sub(r"[\x00-\x20\x7f]+", "", text).lower()


def url_problem(target: str) -> str | None:
    """Why a link target is unsafe (a scheme other than http, https or mailto), or None."""
    match = SCHEME.match(normalised_url(target))
    if match and match[1] not in SAFE_SCHEMES:
        return f"link target '{target[:60]}' uses the scheme '{match[1]}:'; only http, https and mailto are allowed"
    return None


def _prose(line: str) -> str:
    """The line with inline code spans blanked out (their content is shown as text, never as HTML)."""
    return CODE_SPAN.sub(lambda m: " " * len(m[0]), line)


def prose_lines(text: str, first_line: int = 1):
    """(line number, text outside code) for every line not inside a fenced code block."""
    in_fence = False
    for offset, line in enumerate(text.split("\n")):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield first_line + offset, _prose(line)


def source_problems(text: str, first_line: int = 1) -> list[tuple[int, str, str]]:
    """(line, code, message) for raw HTML outside the allow-list and for unsafe link targets."""
    problems = []
    for number, line in prose_lines(text, first_line):
        for match in AUTOLINK.finditer(line):
            reason = url_problem(match[1])
            if reason:
                problems.append((number, "unsafe-link", reason))
        scrubbed = AUTOLINK.sub(" ", line)
        for match in RAW_HTML.finditer(scrubbed):
            tag = (match[2] or "").lower()
            if not tag:
                problems.append((number, "unsafe-html", "HTML comments, declarations and processing instructions"))
            elif tag not in SOURCE_TAGS:
                problems.append((number, "unsafe-html", f"raw HTML tag <{tag}> is not allowed"))
            elif (match[3] or "").strip(" /"):
                problems.append((number, "unsafe-html", f"<{tag}> with attributes; allowed tags take no attributes"))
        for match in MD_LINK.finditer(line):
            reason = url_problem(match[1] or match[2] or "")
            if reason:
                problems.append((number, "unsafe-link", reason))
    return problems


# ---------------------------------------------------------------------------------------- escaping

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]!|])")


def html_text(value: object) -> str:
    """Any value as HTML text (for navigation titles and other places rendered as HTML)."""
    return html.escape(str(value), quote=True)


def md_text(value: object) -> str:
    """Any value as inert Markdown text: no HTML, no link, no emphasis, one line."""
    flat = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


# ------------------------------------------------------------------------------------ rendered HTML


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in RENDERED_TAGS:
            self.problems.append(f"<{tag}> is not an allowed element")
        for name, value in attrs:
            self._attribute(tag, name, value or "")

    handle_startendtag = handle_starttag

    def _attribute(self, tag: str, name: str, value: str) -> None:
        if name.startswith("on"):
            self.problems.append(f"<{tag} {name}=…>: event-handler attributes are not allowed")
        elif name == "style":
            if not SAFE_STYLE.match(value):
                self.problems.append(f"<{tag} style={value[:40]!r}>: only text-align styles are allowed")
        elif name in URL_ATTRS:
            reason = url_problem(value)
            if reason:
                self.problems.append(f"<{tag} {name}=…>: {reason}")
        elif name == "type" and tag == "input" and value not in INPUT_TYPES:
            self.problems.append(f"<input type={value!r}> is not allowed")
        elif name not in RENDERED_ATTRS and not name.startswith(("data-", "aria-")):
            self.problems.append(f"<{tag} {name}=…> is not an allowed attribute")

    def handle_comment(self, data: str) -> None:  # comments cannot run, but nothing should hide in them
        if "<" in data:
            self.problems.append("an HTML comment holding markup")

    def handle_decl(self, decl: str) -> None:
        self.problems.append(f"a declaration <!{decl[:20]}>")

    def handle_pi(self, data: str) -> None:
        self.problems.append("a processing instruction")


def rendered_problems(page_html: str) -> list[str]:
    """Problems in the HTML a page's Markdown rendered to (empty when everything is allowed)."""
    checker = _Checker()
    checker.feed(page_html)
    checker.close()
    return sorted(set(checker.problems))
