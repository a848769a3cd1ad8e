"""What HTML and which link targets may reach the site: allow-lists, never deny-lists.

One check of entry Markdown, ``check_markdown``, is shared by ``skillkb validate``, ``skillkb docs build``
(which refuses a library ``validate`` refuses) and ``skillkb export`` (which refuses to write one). It
renders the Markdown with the site's own Python-Markdown pipeline (``SITE_MARKDOWN_YAML``: the
``markdown_extensions`` of mkdocs.yml, after the ones mkdocs always loads) and then checks that

- every piece of raw HTML the renderer let through is one of a few formatting tags with no attribute at
  all (``SOURCE_TAGS``);
- the rendered HTML holds only elements, attributes and URLs on the site's allow-list (the check the build
  runs on every page, ``rendered_problems``): this catches attribute lists (``{: onclick=…}``) and any
  other way Markdown syntax could set an attribute;
- every link target uses http, https or mailto once HTML entities, white space and control characters
  are undone (``java&#115;cript:`` is ``javascript:``) and is not protocol-relative (``//host``).

Checking what the renderer produces, not the source text, is the point: regexes over the source disagree
with the renderer about code spans, escapes, tag syntax and attribute lists, and every disagreement was a
way past ``validate``. Only without Python-Markdown (a base install, no ``site`` extra) does
``check_markdown`` fall back to ``source_problems``, a stricter scan of the source alone.

``validate`` also compares mkdocs.yml's ``markdown_extensions`` with ``SITE_MARKDOWN_YAML`` and refuses a
difference, so the site cannot render with a pipeline the check did not use. mkdocs.yml is read here as
inert data: its ``!!python`` tags are never constructed.

Values from ``entry.yaml`` (titles, topics, notes, evidence …) are never markup: ``md_text`` escapes
them for Markdown, ``html_text`` for HTML.
"""

from __future__ import annotations

import html
import re
import threading
from dataclasses import dataclass, field
from functools import cache
from html.parser import HTMLParser
from typing import Any, NamedTuple
from xml.etree import ElementTree

import yaml

# Raw HTML an entry may write in its Markdown: inline formatting only, and never with attributes.
SOURCE_TAGS = frozenset({"br", "sub", "sup", "kbd", "b", "i", "em", "strong", "code", "s", "del", "ins", "mark"})
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):")
# Browsers read "//host", "\\host" and "/\host" alike: another site, over the page's own scheme.
PROTOCOL_RELATIVE = re.compile(r"^[/\\]{2}")

# A raw tag is allowed only in exactly this form: <b>, </b>, <br>, <br/>, <br />.
ALLOWED_RAW = re.compile(rf"</?(?:{'|'.join(sorted(SOURCE_TAGS))})\s*/?>", re.IGNORECASE)
# Markup inside raw HTML the renderer passed through, as a browser tokenises it (``<`` may occur inside).
RAW_TOKEN = re.compile(r"<[A-Za-z/!?][^>]*>?")
TAG_NAME = re.compile(r"</?([A-Za-z][^\s/>]*)")

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

# mkdocs.yml's ``markdown_extensions``, verbatim. ``pipeline_problem`` refuses a mkdocs.yml that differs:
# a new extension can emit new HTML, so it is reviewed here (and its output checked) before the site uses it.
SITE_MARKDOWN_YAML = """\
- admonition
- attr_list
- md_in_html
- tables
- pymdownx.details
- pymdownx.superfences
- pymdownx.inlinehilite
- pymdownx.highlight:
    use_pygments: true
- toc:
    permalink: true
    slugify: !!python/object/apply:pymdownx.slugs.slugify
      kwds:
        case: lower
"""
# mkdocs puts these before the configured ones (``markdown_extensions`` built-ins in mkdocs.config.defaults).
MKDOCS_BUILTINS = ("toc", "tables", "fenced_code")
TAB_LENGTH = 4  # Python-Markdown's default, which mkdocs keeps: tabs are expanded before anything else


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
    """Why a link target is unsafe (protocol-relative, or a scheme other than http, https, mailto), or None."""
    url = normalised_url(target)
    if PROTOCOL_RELATIVE.match(url):
        return f"link target '{target[:60]}' is protocol-relative (it points at another host)"
    match = SCHEME.match(url)
    if match and match[1] not in SAFE_SCHEMES:
        return f"link target '{target[:60]}' uses the scheme '{match[1]}:'; only http, https and mailto are allowed"
    return None


# --------------------------------------------------------------------------------- the shared check


@dataclass
class MarkdownReport:
    """What one Markdown document would put on a page: its problems, and every link target it holds."""

    problems: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, code, message)
    links: list[tuple[int | None, str]] = field(default_factory=list)  # (line, target) of every href and src


def check_markdown(text: str, first_line: int = 1) -> MarkdownReport:
    """Render ``text`` as the site does and check the result; lines count from ``first_line``."""
    renderer = site_renderer()
    if renderer is None:
        return source_report(text, first_line)
    page, raw, references = renderer.render(text)
    problems, raw_spans = _raw_problems(raw, _Locator(text, first_line))
    checker = _Checker()
    checker.feed(page)
    checker.close()
    problems += _rendered_problems(checker.findings, references, raw_spans, _Locator(text, first_line))
    links = _Locator(text, first_line)
    return MarkdownReport(
        sorted(set(problems), key=lambda p: (p[0] or 0, p[1], p[2])),
        [(links.line(links.find(url)), url) for url in dict.fromkeys(checker.urls + references)],
    )


def _raw_problems(raw: list[str], source: _Locator) -> tuple[list[tuple[int | None, str, str]], list[range]]:
    """Problems of the raw HTML pieces, and where in the source each refused tag is."""
    problems, spans = [], []
    for piece in raw:
        for message, token in raw_html_problems(piece):
            at = source.find(token, token.split()[0])
            if at is not None:
                spans.append(range(at, at + len(token)))
            problems.append((source.line(at), "unsafe-html", message))
    return problems, spans


def _rendered_problems(
    findings: list[Finding], references: list[str], raw_spans: list[range], where: _Locator
) -> list[tuple[int | None, str, str]]:
    """The rendered allow-list's findings, plus unsafe reference definitions, each mistake named once."""
    # A definition no link uses renders nothing, but it is still a link target written in the file.
    findings = findings + [
        Finding("unsafe-link", reason, (url,), url) for url in references if (reason := url_problem(url))
    ]
    located = [(where.find(*f.needles), f) for f in findings]
    known_urls = {normalised_url(f.url) for at, f in located if f.url is not None and at is not None}
    out, seen_urls = [], set()
    for at, finding in located:
        if at is not None and any(at in span for span in raw_spans):
            continue  # an attribute of a raw tag that is refused already
        if finding.url is not None:
            key = (where.line(at), normalised_url(finding.url))
            if key in seen_urls or (at is None and key[1] in known_urls):
                continue  # the same target, named already where the line is known
            seen_urls.add(key)
        out.append((where.line(at), finding.code, finding.message))
    return out


def raw_html_problems(raw: str) -> list[tuple[str, str]]:
    """(message, token) for every piece of markup in raw HTML that is not an allowed tag without attributes."""
    return [(_raw_message(m[0]), m[0]) for m in RAW_TOKEN.finditer(raw) if not ALLOWED_RAW.fullmatch(m[0])]


def _raw_message(token: str) -> str:
    if token.startswith(("<!", "<?")):
        return "HTML comments, declarations and processing instructions are not allowed"
    name = TAG_NAME.match(token)
    tag = name[1].lower() if name else ""
    if tag in SOURCE_TAGS:
        return f"<{tag}> with attributes; allowed tags take no attributes"
    return f"raw HTML tag <{tag}> is not allowed" if tag else f"malformed markup {token[:30]!r}"


class _Locator:
    """Finds where a piece of the rendered output came from in the source, to name its line."""

    def __init__(self, text: str, first_line: int) -> None:
        # The renderer expands tabs first: search that text, so rendered values and raw tags are found as is.
        self.text = text.expandtabs(TAB_LENGTH)
        self.first_line = first_line
        self.code = _fence_spans(self.text)  # a match inside fenced code is not where the output came from
        self.after: dict[str, int] = {}  # the same needle twice is found twice, in order

    def find(self, *needles: str) -> int | None:
        """Offset of the first of ``needles`` found (case-insensitive, outside fenced code), or None."""
        for needle in needles:
            if not needle:
                continue
            pattern = re.compile(re.escape(needle), re.IGNORECASE)
            for start in (self.after.get(needle, 0), 0):
                at = next((m.start() for m in pattern.finditer(self.text, start) if not self._in_code(m.start())), None)
                if at is not None:
                    self.after[needle] = at + 1
                    return at
        return None

    def _in_code(self, offset: int) -> bool:
        return any(a <= offset < b for a, b in self.code)

    def line(self, offset: int | None) -> int | None:
        return None if offset is None else self.first_line + self.text.count("\n", 0, offset)


# -------------------------------------------------------------------------------- the site's pipeline


class Tagged(NamedTuple):
    """A YAML value with an application tag (``!!python/…``, ``!ENV`` …), kept as data, never constructed."""

    tag: str
    value: object


class _InertLoader(yaml.SafeLoader):
    """Reads mkdocs.yml without running it: mkdocs.yml is code (its ``!!python`` tags call Python)."""


def _inert(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Tagged:
    if isinstance(node, yaml.MappingNode):
        return Tagged(suffix, loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Tagged(suffix, loader.construct_sequence(node, deep=True))
    return Tagged(suffix, loader.construct_scalar(node))


_InertLoader.add_multi_constructor("tag:yaml.org,2002:python/", _inert)
_InertLoader.add_multi_constructor("!", _inert)


def _extension_list(items: object) -> list[tuple[str, Any]] | None:
    """A ``markdown_extensions`` value as mkdocs reads it: (name, config) in order; None when malformed."""
    if not isinstance(items, list):
        return None
    out: list[tuple[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            out.append((item, {}))
        elif isinstance(item, dict) and len(item) == 1:
            name, config = next(iter(item.items()))
            out.append((str(name), config or {}))
        else:
            return None
    return out


def _site_list() -> list[tuple[str, Any]]:
    listed = _extension_list(yaml.load(SITE_MARKDOWN_YAML, Loader=_InertLoader))
    assert listed is not None
    return listed


def pipeline_problem(mkdocs_yml: str) -> str | None:
    """How mkdocs.yml would render entry Markdown differently from ``check_markdown`` (None: it would not)."""
    try:
        config = yaml.load(mkdocs_yml, Loader=_InertLoader)
    except yaml.YAMLError as exc:
        return f"mkdocs.yml does not parse ({str(exc).splitlines()[0]})"
    found = _extension_list(config.get("markdown_extensions", []) if isinstance(config, dict) else None)
    expected = _site_list()
    if found == expected:
        return None
    if found is None:
        return "markdown_extensions is not a list of names and {name: config} items"
    names, wanted = [n for n, _ in found], [n for n, _ in expected]
    added, removed = [n for n in names if n not in wanted], [n for n in wanted if n not in names]
    if added or removed:
        what = "; ".join(
            part
            for part in (f"adds {', '.join(added)}" if added else "", f"drops {', '.join(removed)}" if removed else "")
            if part
        )
    elif names != wanted:
        what = "lists the same extensions in another order"
    else:
        what = "configures " + ", ".join(n for (n, c), (_, e) in zip(found, expected, strict=True) if c != e)
        what += " differently"
    return f"markdown_extensions {what} than the pipeline `skillkb validate` checks with"


def _resolved(value: object) -> object:
    """A config value for Python-Markdown. The one tag SITE_MARKDOWN_YAML uses is built here by name and any
    other is refused, so the check never imports what a file names."""
    if isinstance(value, Tagged):
        if value.tag != "object/apply:pymdownx.slugs.slugify" or not isinstance(value.value, dict):
            raise ValueError(f"SITE_MARKDOWN_YAML: unsupported tag {value.tag}")
        from pymdownx.slugs import slugify

        return slugify(**value.value.get("kwds", {}))
    if isinstance(value, dict):
        return {k: _resolved(v) for k, v in value.items()}
    return value


def site_extensions() -> tuple[list[str], dict[str, Any]]:
    """The extensions and configs mkdocs hands Python-Markdown for this site (its built-ins first)."""
    names = list(MKDOCS_BUILTINS)
    configs: dict[str, Any] = {}
    for name, config in _site_list():
        if name not in names:
            names.append(name)
        if config:
            configs[name] = _resolved(config)
    return names, configs


class _Renderer:
    """The site's Python-Markdown pipeline, noting every piece of raw HTML it lets through.

    Raw HTML reaches a page from two places only: the ``html_block`` preprocessor (block-level HTML, and
    md_in_html) and the ``html`` inline pattern. Both put it in the HTML stash, so whatever either adds
    there is the author's raw HTML. Other stash entries (highlighted code, code spans) are generated, and
    are checked by the rendered-HTML allow-list like everything else on the page.
    """

    def __init__(self) -> None:
        import markdown

        names, configs = site_extensions()
        self.md = markdown.Markdown(extensions=names, extension_configs=configs, tab_length=TAB_LENGTH)
        self.raw: list[str] = []
        self.lock = threading.Lock()  # one instance is shared, and a Markdown object is not reentrant
        self._note_stash(self.md.preprocessors["html_block"], "run")
        self._note_stash(self.md.inlinePatterns["html"], "handleMatch")

    def _note_stash(self, processor: object, method: str) -> None:
        original = getattr(processor, method)

        def noting(*args: Any) -> Any:
            stash = self.md.htmlStash.rawHtmlBlocks
            before = len(stash)
            result = original(*args)
            self.raw.extend(_as_text(item) for item in stash[before:])
            return result

        setattr(processor, method, noting)

    def render(self, text: str) -> tuple[str, list[str], list[str]]:
        """The HTML of ``text``, the raw HTML pieces it holds and the URLs of its reference definitions."""
        with self.lock:
            self.md.reset()
            self.raw = []
            page = self.md.convert(text)
            return page, self.raw, [url for url, _title in self.md.references.values()]


def _as_text(item: object) -> str:
    # md_in_html stashes an element tree for ``<div markdown>``; it is raw HTML all the same.
    return ElementTree.tostring(item, encoding="unicode") if isinstance(item, ElementTree.Element) else str(item)


@cache
def site_renderer() -> _Renderer | None:
    """The shared renderer, or None without Python-Markdown and pymdown-extensions (the ``site`` extra)."""
    try:
        return _Renderer()
    except ImportError:
        return None


# ------------------------------------------------------------------------------ source-only fallback

FENCE_OPEN = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[ \t]*(?:\{[^\n]*\}|\.?[\w#.+-]*(?:[ \t]+[A-Za-z]\w*(?:=(?:\"[^\"\n]*\"|'[^'\n]*'))?)*)?"
    r"[ \t]*$"
)
# Python-Markdown's code span: a backtick run not escaped, closed by a run of the same length, in one paragraph.
CODE_SPAN = re.compile(r"(?<!\\)(`+)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
SOURCE_TAG = re.compile(r"<[A-Za-z/!?][^<>]*>")
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]*:[^<>\s]*)>")
LINK_TARGET = re.compile(r"\]\(([^()\n]*(?:\([^()\n]*\)[^()\n]*)*)\)|^[ \t]*\[[^\]\n]+\]:[ \t]*(.+)$", re.MULTILINE)
ATTR_LIST = re.compile(r"\{(:?)[ \t]*([^{}\n]+?)[ \t]*\}")
ATTR_ITEM = re.compile(r"""([^\s=}]+)(?:=(?:"[^"]*"|'[^']*'|\S*))?""")


def _fence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of fenced code bodies; an opening fence that is never closed is not a fence."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    spans, i = [], 0
    while i < len(lines):
        match = FENCE_OPEN.match(lines[i])
        if match:
            closer = re.compile(rf"^[ \t]*{re.escape(match[1][0])}{{{len(match[1])},}}[ \t]*$")
            end = next((j for j in range(i + 1, len(lines)) if closer.match(lines[j])), None)
            if end is not None:
                spans.append((starts[i + 1], starts[end]))
                i = end
        i += 1
    return spans


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def prose_text(text: str) -> str:
    """``text`` with fenced code bodies and code spans blanked: same length, same line breaks."""
    out = text.expandtabs(TAB_LENGTH)
    for start, end in _fence_spans(out):
        out = out[:start] + _blank(out[start:end]) + out[end:]
    return CODE_SPAN.sub(lambda m: _blank(m[0]), out)


def _attr_list_problems(match: re.Match[str]) -> list[str]:
    """Attributes an attribute list ``{: …}`` would set that the allow-list does not let an author set."""
    body = match[2]
    if not match[1] and "=" not in body and not re.search(r"(^|\s)on", body, re.IGNORECASE):
        return []  # plain braces in prose, not an attribute list that could set anything harmful
    out = []
    for item in ATTR_ITEM.finditer(body):
        key = item[1].lower()
        if key.startswith((".", "#")) or key in RENDERED_ATTRS - URL_ATTRS - {"style", "type"}:
            continue
        out.append(f"the attribute list {{{match[1]} {body[:40]}}} sets '{key}', which an entry may not set")
    return out


def source_problems(text: str, first_line: int = 1) -> list[tuple[int, str, str]]:
    """(line, code, message) found in the source alone: the fallback of ``check_markdown`` without
    Python-Markdown. It is stricter than the renderer: tags across lines, attribute lists, any ``](…)``."""
    prose = prose_text(text)

    def line(offset: int) -> int:
        return first_line + prose.count("\n", 0, offset)

    problems = []
    for match in AUTOLINK.finditer(prose):
        reason = url_problem(match[1])
        if reason:
            problems.append((line(match.start()), "unsafe-link", reason))
    scrubbed = AUTOLINK.sub(lambda m: _blank(m[0]), prose)
    for match in SOURCE_TAG.finditer(scrubbed):
        if not ALLOWED_RAW.fullmatch(match[0]):
            problems.append((line(match.start()), "unsafe-html", _raw_message(match[0])))
    for match in ATTR_LIST.finditer(scrubbed):
        problems += [(line(match.start()), "unsafe-html", message) for message in _attr_list_problems(match)]
    for match in LINK_TARGET.finditer(scrubbed):
        reason = url_problem((match[1] if match[1] is not None else match[2]).strip().lstrip("<"))
        if reason:
            problems.append((line(match.start()), "unsafe-link", reason))
    return sorted(set(problems))


def source_report(text: str, first_line: int = 1) -> MarkdownReport:
    """``check_markdown`` from the source alone: ``source_problems`` and the link targets written."""
    prose = AUTOLINK.sub(lambda m: _blank(m[0]), prose_text(text))
    links = []
    for match in LINK_TARGET.finditer(prose):
        words = (match[1] if match[1] is not None else match[2]).strip().lstrip("<").split()
        if words:
            links.append((first_line + prose.count("\n", 0, match.start()), words[0].rstrip(">")))
    return MarkdownReport(list(source_problems(text, first_line)), links)


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


@dataclass(frozen=True)
class Finding:
    """One thing outside the rendered allow-list, with the source text that likely produced it."""

    code: str  # unsafe-html, or unsafe-link for a URL
    message: str
    needles: tuple[str, ...]  # what to look for in the source to name the line, best first
    url: str | None = None  # the link target, for a URL


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.findings: list[Finding] = []
        self.urls: list[str] = []  # every href and src, to check where relative links lead

    @property
    def problems(self) -> list[str]:
        return [f.message for f in self.findings]

    def _flag(self, message: str, *needles: str, code: str = "unsafe-html", url: str | None = None) -> None:
        self.findings.append(Finding(code, message, needles, url))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in RENDERED_TAGS:
            self._flag(f"<{tag}> is not an allowed element", f"<{tag}")
        for name, value in attrs:
            self._attribute(tag, name, value or "")

    handle_startendtag = handle_starttag

    def _attribute(self, tag: str, name: str, value: str) -> None:
        if name.startswith("on"):
            self._flag(f"<{tag} {name}=…>: event-handler attributes are not allowed", f"{name}=", name)
        elif name == "style":
            if not SAFE_STYLE.match(value):
                self._flag(f"<{tag} style={value[:40]!r}>: only text-align styles are allowed", "style=", value)
        elif name in URL_ATTRS:
            self.urls.append(value)
            reason = url_problem(value)
            if reason:
                self._flag(f"<{tag} {name}=…>: {reason}", value, f"{name}=", code="unsafe-link", url=value)
        elif name == "type" and tag == "input" and value not in INPUT_TYPES:
            self._flag(f"<input type={value!r}> is not allowed", "type=")
        elif name not in RENDERED_ATTRS and not name.startswith(("data-", "aria-")):
            self._flag(f"<{tag} {name}=…> is not an allowed attribute", f"{name}=", name)

    def handle_comment(self, data: str) -> None:  # comments cannot run, but nothing should hide in them
        if "<" in data:
            self._flag("an HTML comment holding markup", "<!--")

    def handle_decl(self, decl: str) -> None:
        self._flag(f"a declaration <!{decl[:20]}>", "<!")

    def handle_pi(self, data: str) -> None:
        self._flag("a processing instruction", "<?")


def rendered_problems(page_html: str) -> list[str]:
    """Problems in the HTML a page's Markdown rendered to (empty when everything is allowed)."""
    checker = _Checker()
    checker.feed(page_html)
    checker.close()
    return sorted(set(checker.problems))
