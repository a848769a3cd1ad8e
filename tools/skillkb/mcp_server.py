"""``skillkb mcp``: a Model Context Protocol server over the library (stdio, or streamable HTTP on 127.0.0.1).

Tools ``search``, ``fetch`` and ``list_skills``; resources ``skill://{name}`` and
``skill://{name}/references/{file}``. Everything is served from the library loaded once per process
(never from a path built out of a request), so no id or URI can reach a file outside the library.
The ``mcp`` SDK is imported inside functions: the CLI must start fast.
"""

import argparse
import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .agent_text import Block, citation_links, find_block, section_blocks
from .api import UsageError
from .api import search as api_search
from .diagnostics import SkillkbError
from .fsutil import read_text
from .index import build_index
from .loader import Entry
from .models import Status
from .retrieval import DEFAULT_RETRIEVER, Hit
from .tokenize import estimate_tokens

log = logging.getLogger("skillkb.mcp")

SERVER_NAME = "skillkb"
HTTP_HOST = "127.0.0.1"
HTTP_PATH = "/mcp"
STATUSES = tuple(s.value for s in Status)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
REFERENCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.md$")
MAX_ID_CHARS = 300
# A search query longer than this is refused at the boundary (search itself reads only the first 2,000
# characters); it bounds what one request can make the server copy and scan.
MAX_QUERY_CHARS = 8_000
INSTRUCTIONS = (
    "Canonical skills for running vLLM on Huawei Ascend NPUs (vllm-ascend, torch_npu, CANN). "
    "Call `search` with the user's question or the exact error string (English or Chinese), then `fetch` "
    "the best hit's id with its `section` to read only what you need (`tokens` tells you the size). "
    "Citations like [vllm-ascend@9bf964c:path#L28-L46] point at upstream files at pinned commits; "
    "`fetch` returns their links in metadata.citations. If `abstained` is true, the library has no answer: "
    "`related` then names the nearest entries, neighbours of the question rather than answers to it. "
    "If `close_call` is true, the first two hits score almost alike: read both before acting on the first."
)


class AccessError(ValueError):
    """A request the library cannot answer (unknown id, path leaving the library, bad filter)."""


# ----------------------------------------------------------------------------------------- outputs


class SearchHit(BaseModel):
    id: str
    title: str
    section: str | None
    heading: str
    score: float
    snippet: str
    url: str
    tokens: int
    tier: int
    path: str
    description: str  # what the entry answers
    not_for: str  # which neighbouring entry takes the nearby questions this one does not answer


class RelatedEntry(BaseModel):
    id: str
    title: str
    url: str
    description: str
    not_for: str


class SearchOutput(BaseModel):
    query: str
    retriever: str
    results: list[SearchHit]
    abstained: bool
    close_call: bool = False
    related: list[RelatedEntry] = []
    library_problems: list[str] = []


class FetchOutput(BaseModel):
    id: str
    title: str
    text: str
    url: str
    metadata: dict[str, Any]


class SkillSummary(BaseModel):
    id: str
    name: str
    title: str
    title_zh: str
    description: str
    tier: int
    status: str
    validation: str
    url: str
    tokens: int
    references: list[str]


class SkillList(BaseModel):
    count: int
    skills: list[SkillSummary]


# ----------------------------------------------------------------------------------------- service


@dataclass
class _Doc:
    file: str  # path from the library root
    text: str  # the whole file as served
    blocks: list[Block]


@dataclass
class _Skill:
    entry: Entry
    record: dict[str, Any]  # the skill-index.json record
    skill: _Doc
    references: dict[str, _Doc] = field(default_factory=dict)


@dataclass
class _State:
    skills: dict[str, _Skill]  # entry id -> skill
    by_name: dict[str, str]  # folder name -> entry id
    load_errors: list[str]


class LibraryService:
    """Answers the tools and resources; thread-safe, since the SDK runs sync tools in worker threads."""

    def __init__(self, root: Path, retriever: str = DEFAULT_RETRIEVER, site_url: str | None = None):
        self.root = root.resolve()
        self.retriever = retriever
        self.site_url = site_url.rstrip("/") if site_url else None
        self._load_lock = threading.Lock()
        self._search_lock = threading.Lock()  # the shared engine builds rankers lazily and is not thread-safe
        self._state: _State | None = None
        self._warming = False

    # -- loading -------------------------------------------------------------------------------------

    def state(self) -> _State:
        with self._load_lock:
            if self._state is None:
                self._state = self._load()
            return self._state

    def _load(self) -> _State:
        from .retrieval import load_servable

        library, errors = load_servable(self.root)  # what search serves: readable, safe entries only
        for line in errors:
            log.warning("library problem (entry skipped if unreadable): %s", line)
        records = {r.id: r.model_dump(mode="json") for r in build_index(library).entries}
        skills: dict[str, _Skill] = {}
        for entry in library.sorted_entries():
            if entry.meta is None or entry.body is None:
                continue
            raw, problem = read_text(entry.folder / "SKILL.md")
            if raw is None:
                log.warning("%s: %s", entry.skill_path, problem.message if problem else "unreadable")
                continue
            skill = _Skill(entry, records[entry.id], _Doc(entry.skill_path, raw, section_blocks(entry.id, entry.body)))
            for name, doc in sorted(entry.references.items()):
                skill.references[name] = _Doc(doc.file, doc.text, section_blocks(entry.id, doc))
            skills[entry.id] = skill
        by_name = {s.entry.name: entry_id for entry_id, s in skills.items()}
        return _State(skills, by_name, errors)

    def start_warming(self) -> None:
        """Warm up in a daemon thread, once per process (HTTP runs the lifespan once per session)."""
        with self._load_lock:
            if self._warming:
                return
            self._warming = True
        threading.Thread(target=self.warm, name="skillkb-warm", daemon=True).start()

    def warm(self) -> None:
        """Load the library and the search engine ahead of the first request (errors surface on use)."""
        try:
            self.state()
            with self._search_lock:
                api_search(self.root, "warm up", k=1, retriever=self.retriever)
        except Exception as exc:  # the first real request reports it properly
            log.warning("warm-up failed: %s", exc)

    # -- lookups -------------------------------------------------------------------------------------

    def url(self, entry: Entry, file: str | None = None, anchor: str | None = None) -> str:
        """The entry's site page when a site URL is configured, else its file path from the library root."""
        suffix = f"#{anchor}" if anchor else ""
        file = file or entry.skill_path
        if not self.site_url:
            return file + suffix
        if file == entry.skill_path:  # the site (mkdocs, directory URLs) puts an entry at <id>/index.md
            return f"{self.site_url}/{entry.id}/{suffix}"
        return f"{self.site_url}/{file.removesuffix('.md')}/{suffix}"  # <id>/references/<name>.md

    def _entry(self, key: str) -> _Skill:
        state = self.state()
        entry_id = key if key in state.skills else state.by_name.get(key)
        if entry_id is None:
            raise AccessError(f"unknown skill id '{key}'; call list_skills for the ids (or use a folder name)")
        return state.skills[entry_id]

    def resolve(self, raw_id: str) -> tuple[_Skill, str | None]:
        """(skill, reference file name or None) for an id, refusing anything that could leave the library."""
        key = check_id(raw_id)
        entry_part, sep, ref = key.partition("/references/")
        if not sep:
            return self._entry(key.removesuffix("/SKILL.md")), None
        skill = self._entry(entry_part)
        if not REFERENCE_RE.match(ref) or ref not in skill.references:
            known = ", ".join(sorted(skill.references)) or "none"
            raise AccessError(f"'{skill.entry.id}' has no reference '{ref}' (references: {known})")
        return skill, ref

    # -- tools ---------------------------------------------------------------------------------------

    def search(self, query: str, k: int = 5, tier: int | None = None) -> dict[str, Any]:
        check_tier(tier)
        if not isinstance(query, str):
            raise AccessError("query must be text")
        if len(query) > MAX_QUERY_CHARS:
            raise AccessError(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS} (search reads 2,000)")
        state = self.state()
        try:
            with self._search_lock:
                result = api_search(self.root, query, k=k, retriever=self.retriever, tier=tier)
        except UsageError as exc:
            raise AccessError(str(exc).replace("--k", "k")) from exc
        except SkillkbError as exc:
            first = exc.diagnostics[0].render() if exc.diagnostics else ""
            raise AccessError(f"the library does not load, so it cannot be searched: {first}") from exc
        hits = [self._search_hit(state.skills[hit.id], hit) for hit in result.results if hit.id in state.skills]
        related = [
            {
                "id": h.id,
                "title": h.title,
                "url": self.url(state.skills[h.id].entry),
                "description": h.description,
                "not_for": h.not_for,
            }
            for h in result.related
            if h.id in state.skills
        ]
        return {
            "query": result.query,
            "retriever": result.retriever,
            "results": hits,
            "abstained": result.abstained,
            "close_call": result.close_call,
            "related": related,
            "library_problems": sorted(set(result.library_problems) | set(state.load_errors)),
        }

    def _search_hit(self, skill: _Skill, hit: Hit) -> dict[str, Any]:
        """One hit as the tool returns it: where its section is, how to open it, and what it costs to load."""
        doc = self._doc_at(skill, hit.path)
        block = find_block(doc.blocks, hit.section) if hit.section != "card" else None
        section = block.anchor if block else None
        return SearchHit(
            id=hit.id,
            title=hit.title,
            section=section,
            heading=hit.heading,
            score=round(hit.score, 6),
            snippet=hit.snippet,
            url=self.url(skill.entry, doc.file, section),
            tokens=estimate_tokens(block.text if block else doc.text),
            tier=hit.tier,
            path=doc.file,
            description=hit.description,
            not_for=hit.not_for,
        ).model_dump()

    @staticmethod
    def _doc_at(skill: _Skill, path: str) -> _Doc:
        for doc in skill.references.values():
            if doc.file == path:
                return doc
        return skill.skill

    def fetch(self, raw_id: str, section: str | None = None) -> dict[str, Any]:
        skill, ref = self.resolve(raw_id)
        doc = skill.references[ref] if ref else skill.skill
        entry, record = skill.entry, skill.record
        text, block = doc.text, None
        if section is not None and section.strip():
            block = find_block(doc.blocks, section)
            if block is None and ref is None:  # search hits may sit in a reference file of the entry
                for name in sorted(skill.references):
                    block = find_block(skill.references[name].blocks, section)
                    if block is not None:
                        ref, doc = name, skill.references[name]
                        break
            if block is None:
                anchors = ", ".join(b.anchor for b in doc.blocks)
                raise AccessError(f"{doc.file} has no section '{section}' (anchors: {anchors})")
            text = block.text
        metadata = {
            "entry_id": entry.id,
            "name": entry.name,
            "file": doc.file,
            "section": block.anchor if block else None,
            "heading": block.heading if block else None,
            "title": record["title"],
            "title_zh": record["title_zh"],
            "tier": record["tier"],
            "status": record["status"],
            "status_reason": record["status_reason"],
            "validation": record["validation"],
            "version_anchors": record["version_anchors"],
            "readsets": record["readsets"],
            "cross_refs": record["cross_refs"],
            "url": self.url(entry, doc.file, block.anchor if block else None),
            "tokens": estimate_tokens(text),
            "sections": [
                {"anchor": b.anchor, "heading": b.heading, "level": b.level, "tokens": estimate_tokens(b.text)}
                for b in doc.blocks
            ],
            "references": [f"{entry.id}/references/{name}" for name in sorted(skill.references)],
            "citations": citation_links(text, entry.meta.readsets if entry.meta else []),
        }
        doc_id = f"{entry.id}/references/{ref}" if ref else entry.id
        return {"id": doc_id, "title": record["title"], "text": text, "url": metadata["url"], "metadata": metadata}

    def list_skills(self, tier: int | None = None, status: str | None = None) -> dict[str, Any]:
        check_tier(tier)
        if status is not None and status not in STATUSES:
            raise AccessError(f"unknown status '{status}'; choose one of {', '.join(STATUSES)}")
        skills = []
        for entry_id in sorted(self.state().skills):
            skill = self.state().skills[entry_id]
            record = skill.record
            if (tier is not None and record["tier"] != tier) or (status is not None and record["status"] != status):
                continue
            skills.append(
                SkillSummary(
                    id=entry_id,
                    name=skill.entry.name,
                    title=record["title"],
                    title_zh=record["title_zh"],
                    description=record["description"],
                    tier=record["tier"],
                    status=record["status"],
                    validation=record["validation"],
                    url=self.url(skill.entry),
                    tokens=estimate_tokens(skill.skill.text),
                    references=record["references"],
                ).model_dump()
            )
        return {"count": len(skills), "skills": skills}

    # -- resources -----------------------------------------------------------------------------------

    def resource_list(self) -> list[tuple[str, str, str]]:
        """(uri, name, description) of every skill and reference file, for resources/list."""
        out = []
        for entry_id in sorted(self.state().skills):
            skill = self.state().skills[entry_id]
            name = skill.entry.name
            out.append((f"skill://{name}", name, skill.record["description"]))
            for ref in sorted(skill.references):
                out.append((f"skill://{name}/references/{ref}", f"{name}/references/{ref}", f"Reference of {name}"))
        return out

    def skill_text(self, name: str) -> str:
        return self._by_name(name).skill.text

    def reference_text(self, name: str, file: str) -> str:
        skill = self._by_name(name)
        if not REFERENCE_RE.match(file) or file not in skill.references:
            raise AccessError(f"skill '{name}' has no reference '{file}'")
        return skill.references[file].text

    def _by_name(self, name: str) -> _Skill:
        if not NAME_RE.match(name) or name not in self.state().by_name:
            raise AccessError(f"unknown skill '{name}'; resources are skill://<folder name>, see list_skills")
        return self.state().skills[self.state().by_name[name]]


def check_id(raw_id: str) -> str:
    """Refuse ids that are empty, absolute, hold '..'/'.'/backslashes/control characters; strip slashes."""
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise AccessError("id is empty; pass an entry id from search or list_skills")
    key = raw_id.strip()
    if len(key) > MAX_ID_CHARS:
        raise AccessError(f"id is longer than {MAX_ID_CHARS} characters")
    if any(ord(ch) < 32 for ch in key) or "\\" in key:
        raise AccessError("id holds control characters or backslashes; use the id exactly as search returns it")
    if key.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", key) or "://" in key:
        raise AccessError(f"'{key}' is an absolute path or URL; ids are paths inside the library")
    if any(part in ("..", ".") for part in key.split("/")):
        raise AccessError(f"'{key}' leaves the library ('..' or '.' in the path)")
    return key.strip("/")


def check_tier(tier: int | None) -> None:
    if tier is not None and tier not in (1, 2, 3):
        raise AccessError(f"tier must be 1, 2 or 3, got {tier}")


# ------------------------------------------------------------------------------------------ server

SEARCH_DESCRIPTION = """Find the skills that answer a question or an error message (English or Chinese).

Returns up to k hits, best first, each with the entry id, the best-matching section (its anchor),
a snippet, a url, `tokens` (the section's approximate size), `description` (what the entry
answers) and `not_for` (which neighbouring entry takes the nearby questions it does not). Before
acting, read the hits' description and not_for and act on the hit that answers the root cause of
the question, which is not always the first; if none does, the library does not cover it.
`abstained` is true when the search finds no answer: `results` is empty and `related` lists the
nearest entries; act on one only if its description plainly covers the root cause. `close_call`
is true when the first two hits score almost alike: the first is then often wrong (right for about
half of real users' questions, against three in four otherwise).

Args:
    query: the question, symptom or exact error string, e.g. "AclmdlRICaptureBegin 207008"
    k: number of hits, 1-100
    tier: only entries of this tier (1 generic vLLM, 2 vLLM Ascend feature, 3 CANN/torch_npu)"""


def with_scope(description: str, root: Path) -> str:
    """The tool's description with what the library does not cover (``not_covered`` of
    ``schemas/retrieval-scope.yaml``) before its arguments: a reader declines a near hit only if it knows
    where the library stops. A missing or malformed scope file leaves the description as it is."""
    from .signals import Lexicon

    not_covered = Lexicon.load(root)[0].not_covered
    if not not_covered:
        return description
    head, args = description.split("\n\nArgs:", 1)
    scope = "The library does not cover these; a question whose root cause is one of them has no entry:\n"
    scope += "\n".join(f"- {item}" for item in not_covered)
    return f"{head}\n\n{scope}\n\nArgs:{args}"


def build_server(root: Path, service: LibraryService | None = None, warm: bool = False):
    """The MCP server (an ``mcp.server.mcpserver.MCPServer``) over the library at ``root``.

    With ``warm``, the library and search engine load in a background thread once the transport is up
    (inside the lifespan, so on stdio the SDK already owns stdout and nothing stray can reach it).
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp_types import Resource as MCPResource

    svc = service or LibraryService(root)

    class SkillServer(MCPServer):
        """Lists every skill as a concrete resource (clients that only list resources see the library)."""

        async def list_resources(self) -> list[MCPResource]:
            listed = [
                MCPResource(uri=uri, name=name, description=description, mime_type="text/markdown")
                for uri, name, description in svc.resource_list()
            ]
            return [*await super().list_resources(), *listed]

    @contextlib.asynccontextmanager
    async def lifespan(_server):
        if warm:
            svc.start_warming()
        yield None

    server = SkillServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING", lifespan=lifespan)

    def tool_call(fn, *args):
        try:
            return fn(*args)
        except AccessError as exc:
            raise ToolError(str(exc)) from exc

    def resource_call(fn, *args):
        try:
            return fn(*args)
        except AccessError as exc:
            raise ResourceError(str(exc)) from exc

    @server.tool(description=with_scope(SEARCH_DESCRIPTION, root))
    def search(query: str, k: int = 5, tier: int | None = None) -> SearchOutput:
        """The search tool: its description is SEARCH_DESCRIPTION with the library's scope (``with_scope``)."""
        return SearchOutput(**tool_call(svc.search, query, k, tier))

    @server.tool()
    def fetch(id: str, section: str | None = None) -> FetchOutput:
        """Read a skill: its SKILL.md, one section of it, or one of its reference files.

        Args:
            id: an entry id from search/list_skills (e.g. "hardware/ascend/ascend-aclgraph-capture-replay"),
                its folder name, or "<entry id>/references/<file>.md" for a reference file
            section: a section anchor (as search returns it) or heading; omit for the whole file. With an
                entry id, sections of its reference files are found too
        """
        return FetchOutput(**tool_call(svc.fetch, id, section))

    @server.tool()
    def list_skills(tier: int | None = None, status: str | None = None) -> SkillList:
        """List the library's skills with their titles, descriptions, tiers and admission status.

        Args:
            tier: only this tier (1, 2 or 3)
            status: only this status: candidate, to-refine, covered (reviewed and verified) or deferred
        """
        return SkillList(**tool_call(svc.list_skills, tier, status))

    @server.resource("skill://{name}", mime_type="text/markdown")
    def skill_md(name: str) -> str:
        """A skill's SKILL.md (Agent Skills format), by folder name."""
        return resource_call(svc.skill_text, name)

    @server.resource("skill://{name}/references/{file}", mime_type="text/markdown")
    def skill_reference(name: str, file: str) -> str:
        """One reference file of a skill."""
        return resource_call(svc.reference_text, name, file)

    return server


def _bound_socket(port: int):
    import socket

    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the listening socket
    # says it is TCP. Without it every response on a reused connection waits ~40 ms for delayed ACKs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((HTTP_HOST, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {HTTP_HOST}:{port}: {exc.strerror}") from exc
    sock.listen(128)
    return sock


class EarlyStop:
    """Until a mode installs its own signal handling, SIGTERM and SIGINT only record that a stop was asked
    (and tell the mode, once it is known). Raising from a signal handler lands at an arbitrary point — in a
    finalizer Python ignores it — so the process could keep serving a stop it was sent."""

    def __init__(self) -> None:
        self.asked = False
        self.on_stop: Callable[[], None] | None = None

    def __call__(self, _signum: int, _frame: object) -> None:
        self.asked = True
        if self.on_stop is not None:
            self.on_stop()

    def install(self) -> "EarlyStop":
        import signal

        for name in STOP_SIGNALS:
            signal.signal(getattr(signal, name), self)
        return self


def serve_http(server, port: int, early: EarlyStop) -> None:
    """Streamable HTTP on 127.0.0.1 only; port 0 picks a free port, announced on stderr once uvicorn has
    started (and so handles SIGTERM and Ctrl-C itself: it drains connections and the process exits 0)."""
    import anyio
    import uvicorn

    sock = _bound_socket(port)
    actual = sock.getsockname()[1]
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=HTTP_HOST)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uv = uvicorn.Server(config)
    early.on_stop = lambda: setattr(uv, "should_exit", True)  # a stop asked before uvicorn took the signals
    uv.should_exit = early.asked

    async def announce() -> None:
        while not uv.started:
            await anyio.sleep(0.01)
        print(f"skillkb mcp: serving http://{HTTP_HOST}:{actual}{HTTP_PATH}", file=sys.stderr, flush=True)

    async def serve() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(announce)
            await uv.serve(sockets=[sock])
            group.cancel_scope.cancel()

    anyio.run(serve)


STOP_SIGNALS = ("SIGTERM", "SIGINT")
STOP_GRACE_SECONDS = 0.3  # lets a reply already being written reach stdout whole


def serve_stdio(server, early: EarlyStop) -> None:
    """Serve over stdin/stdout until stdin closes, or until SIGTERM or SIGINT ends the process with status 0.

    The SDK reads stdin in a worker thread that no cancellation interrupts, so a signal (or SystemExit)
    would leave the process waiting for the client to close stdin. Instead the signal is received on the
    event loop, the server is cancelled, and after a short grace the process exits: it writes nothing
    more, and a reply already being written is finished first, so stdout holds only whole messages.
    """
    import signal

    import anyio

    async def serve() -> None:
        with anyio.open_signal_receiver(*(getattr(signal, name) for name in STOP_SIGNALS)) as signals:
            if early.asked:  # stopped while starting up: nothing was served, nothing to finish
                os._exit(0)
            async with anyio.create_task_group() as group:
                group.start_soon(_stop_on_signal, signals, group.cancel_scope)
                await server.run_stdio_async()
                group.cancel_scope.cancel()  # stdin closed: the signal watcher is not needed any more

    anyio.run(serve)


async def _stop_on_signal(signals, serving) -> None:
    import anyio

    async for _signum in signals:
        serving.cancel()  # no new work or reply; a write running in a thread still completes
        with anyio.CancelScope(shield=True):
            await anyio.sleep(STOP_GRACE_SECONDS)
        sys.stderr.flush()
        os._exit(0)  # not SystemExit: the thread blocked reading stdin would keep the process alive


def run(
    root: Path, http: bool = False, port: int = 8765, retriever: str = DEFAULT_RETRIEVER, site_url: str | None = None
) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="skillkb mcp: %(message)s")
    early = EarlyStop().install()
    service = LibraryService(root, retriever=retriever, site_url=site_url)
    server = build_server(root, service, warm=True)
    if http:
        serve_http(server, port, early)
    else:
        serve_stdio(server, early)


# --------------------------------------------------------------------------------------------- CLI


def cmd_mcp(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be between 0 and 65535")
    if args.site_url and not re.match(r"^https?://[^\s]+$", args.site_url):
        raise UsageError(f"--site-url must be an http(s) URL, got '{args.site_url}'")
    from .diagnostics import require

    require("mcp", "mcp", "`skillkb mcp`")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends an interactive HTTP server quietly
        run(
            args.root,
            http=args.http,
            port=args.port,
            retriever=args.retriever or DEFAULT_RETRIEVER,
            site_url=args.site_url,
        )
    return 0


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    from .retrieval import RETRIEVERS

    p = subparsers.add_parser("mcp", help="serve the library to agents over MCP (stdio, or --http on 127.0.0.1)")
    p.add_argument("--http", action="store_true", help=f"serve streamable HTTP at http://{HTTP_HOST}:PORT{HTTP_PATH}")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765; 0 picks a free one)")
    p.add_argument("--retriever", choices=list(RETRIEVERS), default=None, help=f"default {DEFAULT_RETRIEVER}")
    p.add_argument(
        "--site-url",
        default=None,
        help="published site root: urls become SITE_URL/<entry id>/#anchor (default: file paths in the library)",
    )
    p.set_defaults(func=cmd_mcp)
