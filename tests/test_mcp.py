"""The MCP server: every tool and resource through the SDK's in-memory client, a real stdio session, and
20 concurrent streamable-HTTP clients against a server subprocess on 127.0.0.1."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from skillkb import api
from skillkb.mcp_server import LibraryService, build_server
from skillkb.tokenize import estimate_tokens

from conftest import DEMO_COMMIT, DEMO_ENTRIES, DEMO_REPO

TIMEOUT = 60
FEATURE = "hardware/ascend/demo-feature"
SECRET = "TOP-SECRET-OUTSIDE-THE-LIBRARY"
REFERENCE = "# Notes\n\n## Pool sizing\n\nSize it to the batch [widget@0123456:src/pool.py#L3-L9].\n"


@pytest.fixture
def lib(library_root: Path) -> Path:
    """The demo library plus a reference file and a subsection, to fetch sections and references."""
    folder = library_root / FEATURE
    skill = folder / "SKILL.md"
    skill.write_text(
        skill.read_text(encoding="utf-8").replace(
            "## Configuration\n\nText.\n", "## Configuration\n\nText.\n\n### Pool knobs\n\nKnob text.\n"
        ),
        encoding="utf-8",
    )
    (folder / "references").mkdir()
    (folder / "references" / "notes.md").write_text(REFERENCE, encoding="utf-8")
    return library_root


def run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await coro_fn(*args)

    return anyio.run(bounded)


async def call(root: Path, tool: str, arguments: dict):
    async with Client(build_server(root)) as client:
        return await client.call_tool(tool, arguments)


def ok(root: Path, tool: str, arguments: dict) -> dict:
    result = run(call, root, tool, arguments)
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error(root: Path, tool: str, arguments: dict) -> str:
    result = run(call, root, tool, arguments)
    assert result.is_error, f"{tool}({arguments}) should fail"
    return result.content[0].text


# ------------------------------------------------------------------------------------------- tools


def test_tools_are_listed_with_schemas(lib: Path) -> None:
    async def go():
        async with Client(build_server(lib)) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go)}
    assert set(tools) == {"search", "fetch", "list_skills"}
    assert tools["search"].input_schema["required"] == ["query"]
    assert tools["search"].input_schema["properties"]["k"]["default"] == 5
    assert tools["fetch"].input_schema["required"] == ["id"]
    assert "results" in tools["search"].output_schema["properties"]
    assert all(t.description for t in tools.values())
    assert "not_for" in tools["search"].description and "does not cover these" not in tools["search"].description


def test_the_search_tool_tells_the_agent_where_the_library_stops(lib: Path) -> None:
    """With a scope file, the tool's description lists its `not_covered` families before the arguments, so
    an agent reading the hits can decline one that is only near (bench/RESULTS.md, round 8)."""
    scope = lib / "schemas" / "retrieval-scope.yaml"
    scope.write_text("not_covered:\n  - tool calling and tool parsers\n  - LoRA serving\n", encoding="utf-8")

    async def go():
        async with Client(build_server(lib)) as client:
            return {t.name: t for t in (await client.list_tools()).tools}["search"].description

    description = run(go)
    head, args = description.split("Args:")
    assert "does not cover these" in head and "- tool calling and tool parsers\n- LoRA serving" in head
    assert "query:" in args
    scope.write_text("not_covered: [[nested]]\n", encoding="utf-8")  # malformed: the plain description
    assert "does not cover these" not in run(go)


def test_search_matches_the_library_api(lib: Path) -> None:
    out = ok(lib, "search", {"query": "pool fails", "k": 3})
    direct = api.search(lib, "pool fails", k=3)
    assert [h["id"] for h in out["results"]] == [h.id for h in direct.results]
    assert out["results"][0]["id"] == FEATURE  # the eval case of the demo library
    assert out["abstained"] is False and out["close_call"] is direct.close_call
    for hit in out["results"]:
        assert set(hit) >= {"id", "title", "section", "heading", "score", "snippet", "url", "tokens", "not_for"}
        assert hit["description"] == DEMO_ENTRIES[hit["id"]][2]  # what a reader chooses among the hits by
        assert hit["url"] and hit["url"].startswith(hit["id"])
        fetched = ok(lib, "fetch", {"id": hit["id"], "section": hit["section"]})
        assert hit["tokens"] == estimate_tokens(fetched["text"]) > 0


def test_the_nearest_entries_of_an_abstention_carry_what_they_answer() -> None:
    """An abstained search's `related` entries come with description and not_for, so the agent can tell
    whether one plainly covers the root cause (the tool's description asks it to) from one that is only near."""
    from conftest import REPO_ROOT

    out = ok(REPO_ROOT, "search", {"query": "tool call parser returns empty arguments"})
    assert out["abstained"] is True and out["results"] == [] and out["related"]
    records = {s["id"]: s for s in ok(REPO_ROOT, "list_skills", {})["skills"]}
    for entry in out["related"]:
        assert entry["description"] == records[entry["id"]]["description"]
        assert "Not this entry" not in entry["not_for"] and "`" in entry["not_for"]  # the list, not its heading


def test_search_filters_and_errors(lib: Path) -> None:
    tier1 = ok(lib, "search", {"query": "pool scheduler allocator", "k": 5, "tier": 1})
    assert tier1["results"] and {h["tier"] for h in tier1["results"]} == {1}
    assert ok(lib, "search", {"query": "   "})["abstained"] is True
    assert "between 1 and 100" in error(lib, "search", {"query": "pool", "k": 0})
    assert "tier must be 1, 2 or 3" in error(lib, "search", {"query": "pool", "tier": 7})


def test_fetch_whole_skill_with_metadata(lib: Path) -> None:
    out = ok(lib, "fetch", {"id": FEATURE})
    assert out["text"] == (lib / FEATURE / "SKILL.md").read_text(encoding="utf-8")
    assert out["id"] == FEATURE and out["title"] == "Demo demo-feature" and out["url"]
    meta = out["metadata"]
    assert (meta["tier"], meta["status"], meta["title_zh"]) == (2, "candidate", "演示条目")
    assert meta["version_anchors"]["vllm_ascend"]["ref"] == "v0.25.1rc1"
    assert meta["readsets"] == [
        {"repo": DEMO_REPO, "commit": DEMO_COMMIT, "tag": "v1.0.0", "files": 1, "evidence": "verified"}
    ]
    assert meta["references"] == [f"{FEATURE}/references/notes.md"]
    assert "triage" in [s["anchor"] for s in meta["sections"]]
    assert meta["citations"][0]["url"].startswith(f"https://github.com/{DEMO_REPO}/blob/{DEMO_COMMIT}/src/pool.py#L1")
    # the folder name works as an id too
    assert ok(lib, "fetch", {"id": "demo-feature"})["text"] == out["text"]


def test_fetch_a_section_by_anchor_or_heading_keeps_subsections(lib: Path) -> None:
    by_anchor = ok(lib, "fetch", {"id": FEATURE, "section": "configuration"})
    by_heading = ok(lib, "fetch", {"id": FEATURE, "section": "## Configuration"})
    assert by_anchor["text"] == by_heading["text"]
    assert by_anchor["text"].startswith("## Configuration\n")
    assert "### Pool knobs" in by_anchor["text"] and "## Version notes" not in by_anchor["text"]
    assert by_anchor["url"].endswith("#configuration")
    assert by_anchor["metadata"]["section"] == "configuration"


def test_fetch_a_reference_file(lib: Path) -> None:
    out = ok(lib, "fetch", {"id": f"{FEATURE}/references/notes.md"})
    assert out["text"] == REFERENCE
    assert out["metadata"]["citations"] == [
        {
            "citation": "widget@0123456:src/pool.py#L3-L9",
            "url": f"https://github.com/{DEMO_REPO}/blob/{DEMO_COMMIT}/src/pool.py#L3-L9",
        }
    ]
    section = ok(lib, "fetch", {"id": f"{FEATURE}/references/notes.md", "section": "pool-sizing"})
    assert section["text"].startswith("## Pool sizing")


@pytest.mark.parametrize(
    ("bad_id", "message"),
    [
        ("../etc/passwd", "leaves the library"),
        ("/etc/passwd", "absolute path"),
        (f"{FEATURE}/../../../etc/passwd", "leaves the library"),
        (f"{FEATURE}/references/../entry.yaml", "leaves the library"),
        (f"{FEATURE}/references/missing.md", "has no reference 'missing.md'"),
        ("hardware/ascend/no-such-entry", "unknown skill id"),
        ("", "id is empty"),
        ("file:///etc/passwd", "absolute path or URL"),
    ],
)
def test_fetch_refuses_ids_outside_the_library(lib: Path, bad_id: str, message: str) -> None:
    text = error(lib, "fetch", {"id": bad_id})
    assert message in text
    assert "root:" not in text


def test_fetch_unknown_section_names_the_anchors(lib: Path) -> None:
    text = error(lib, "fetch", {"id": FEATURE, "section": "no-such-section"})
    assert "no section 'no-such-section'" in text and "triage" in text


def test_list_skills_and_filters(lib: Path) -> None:
    everything = ok(lib, "list_skills", {})
    assert everything["count"] == 3
    assert [s["id"] for s in everything["skills"]] == sorted(api.load_or_fail(lib).entries)
    assert all(s["url"] and s["description"] and s["tokens"] > 0 for s in everything["skills"])
    assert [s["id"] for s in ok(lib, "list_skills", {"tier": 3})["skills"]] == ["hardware/ascend/demo-constraint"]
    assert ok(lib, "list_skills", {"status": "candidate"})["count"] == 3
    assert ok(lib, "list_skills", {"status": "covered"})["count"] == 0
    assert "unknown status 'done'" in error(lib, "list_skills", {"status": "done"})


# --------------------------------------------------------------------------------------- resources


def test_resources(lib: Path) -> None:
    async def go():
        async with Client(build_server(lib)) as client:
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            skill = (await client.read_resource("skill://demo-feature")).contents[0].text
            reference = (await client.read_resource("skill://demo-feature/references/notes.md")).contents[0].text
            failures = {}
            for uri in (
                "skill://no-such-skill",
                "skill://demo-feature/references/missing.md",
                "skill://demo-feature/references/..%2F..%2Fentry.yaml",
                "skill://..%2F..%2Fetc",
                "skill://demo-feature/references/%2Fetc%2Fpasswd",
            ):
                with pytest.raises(MCPError) as caught:
                    await client.read_resource(uri)
                failures[uri] = str(caught.value)
            return templates, skill, reference, failures

    templates, skill, reference, failures = run(go)
    assert templates == {"skill://{name}", "skill://{name}/references/{file}"}
    assert skill == (lib / FEATURE / "SKILL.md").read_text(encoding="utf-8")
    assert reference == REFERENCE
    assert "unknown skill 'no-such-skill'" in failures["skill://no-such-skill"]
    assert "has no reference 'missing.md'" in failures["skill://demo-feature/references/missing.md"]
    assert all("root:" not in message for message in failures.values())


def test_symlinks_out_of_the_library_are_never_served(lib: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    (lib / FEATURE / "references" / "leak.md").symlink_to(outside / "secret.md")
    evil = outside / "evil-entry"
    evil.mkdir()
    (evil / "SKILL.md").write_text(f"---\nname: evil-entry\ndescription: {SECRET}\n---\n\n# Evil\n\n{SECRET}\n")
    (lib / "hardware" / "ascend" / "evil-entry").symlink_to(evil, target_is_directory=True)

    service = LibraryService(lib)
    assert "leak.md" not in service.state().skills[FEATURE].references
    for tool, arguments in (
        ("fetch", {"id": f"{FEATURE}/references/leak.md"}),
        ("fetch", {"id": "hardware/ascend/evil-entry"}),
        ("fetch", {"id": "evil-entry"}),
    ):
        assert SECRET not in error(lib, tool, arguments)
    listed = ok(lib, "list_skills", {})
    assert SECRET not in json.dumps(listed) and listed["count"] == 3

    async def read(uri: str) -> str:
        async with Client(build_server(lib)) as client:
            try:
                return (await client.read_resource(uri)).contents[0].text
            except MCPError as exc:
                return f"error: {exc}"

    for uri in ("skill://demo-feature/references/leak.md", "skill://evil-entry"):
        answer = run(read, uri)
        assert answer.startswith("error:") and SECRET not in answer


def test_an_entry_the_site_would_refuse_is_not_served(lib: Path) -> None:
    """Markdown that fails the safety check (validate, docs build, export) is not handed to agents either."""
    skill = lib / FEATURE / "SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "\n<img src=x onerror=alert(1)>\n", encoding="utf-8")
    listed = ok(lib, "list_skills", {})
    assert FEATURE not in {s["id"] for s in listed["skills"]} and listed["count"] == 2
    assert "onerror" not in error(lib, "fetch", {"id": FEATURE})
    found = ok(lib, "search", {"query": "pool fails", "k": 5})
    assert FEATURE not in {h["id"] for h in found["results"] + found["related"]}


# ------------------------------------------------------------------------------------- subprocesses


def server_command(root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "skillkb.cli", "--root", str(root), "mcp", *extra]


def server_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"}


def test_stdio_session_with_the_sdk_client(lib: Path) -> None:
    command = server_command(lib, "--retriever", "hybrid")
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env())

    async def go():
        async with Client(params, read_timeout_seconds=TIMEOUT) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            found = await client.call_tool("search", {"query": "pool fails", "k": 2})
            first = found.structured_content["results"][0]
            fetched = await client.call_tool("fetch", {"id": first["id"], "section": first["section"]})
            return names, found, fetched

    names, found, fetched = run(go)
    assert names == {"search", "fetch", "list_skills"}
    assert not found.is_error and found.structured_content["retriever"] == "hybrid"
    assert found.structured_content["results"][0]["id"] == FEATURE
    assert not fetched.is_error and fetched.structured_content["metadata"]["entry_id"] == FEATURE


def _reader(stream, lines: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        lines.put(line)
    lines.put(None)


def test_stdio_stdout_carries_only_protocol_messages(lib: Path) -> None:
    """Raw JSON-RPC over a pipe: every stdout line is a protocol message, even while dense embeddings build."""
    proc = subprocess.Popen(
        server_command(lib, "--retriever", "hybrid"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=server_env(),
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    messages: list[dict] = []

    def request(number: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            line = lines.get(timeout=TIMEOUT)
            assert line is not None, "the server closed stdout"
            message = json.loads(line)  # a stray print would fail here
            assert message.get("jsonrpc") == "2.0"
            messages.append(message)
            if message.get("id") == number:
                return message

    try:
        init = request(
            1,
            "initialize",
            {
                "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1],
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        )
        assert init["result"]["serverInfo"]["name"] == "skillkb"
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        assert {t["name"] for t in request(2, "tools/list", {})["result"]["tools"]} == {
            "search",
            "fetch",
            "list_skills",
        }
        found = request(3, "tools/call", {"name": "search", "arguments": {"query": "pool fails"}})["result"]
        assert not found.get("isError") and found["structuredContent"]["results"][0]["id"] == FEATURE
        fetched = request(4, "tools/call", {"name": "fetch", "arguments": {"id": FEATURE}})["result"]
        assert fetched["structuredContent"]["text"] == (lib / FEATURE / "SKILL.md").read_text(encoding="utf-8")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
    while (line := lines.get(timeout=TIMEOUT)) is not None:
        json.loads(line)
    assert len(messages) >= 4


def test_twenty_parallel_http_clients(lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    proc = subprocess.Popen(
        server_command(lib, "--http", "--port", "0"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stderr, lines), daemon=True).start()
    try:
        url = None
        while url is None:  # bounded: each wait times out, and a dead server ends the stream
            line = lines.get(timeout=TIMEOUT)
            assert line is not None, f"server exited with {proc.wait(timeout=TIMEOUT)} before serving"
            if "serving http://127.0.0.1:" in line:
                url = line.split("serving ", 1)[1].strip()
        expected = {h.id for h in api.search(lib, "pool fails", k=3).results}
        skill_text = (lib / FEATURE / "SKILL.md").read_text(encoding="utf-8")
        answers: list[tuple[set[str], str]] = []

        async def one_client() -> None:
            async with Client(url, read_timeout_seconds=TIMEOUT) as client:
                found = await client.call_tool("search", {"query": "pool fails", "k": 3})
                fetched = await client.call_tool("fetch", {"id": FEATURE})
                assert not found.is_error and not fetched.is_error
                ids = {h["id"] for h in found.structured_content["results"]}
                answers.append((ids, fetched.structured_content["text"]))

        async def all_clients() -> None:
            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for _ in range(20):
                        group.start_soon(one_client)

        anyio.run(all_clients)
        assert len(answers) == 20
        assert all(ids == expected and text == skill_text for ids, text in answers)
        assert proc.poll() is None, "the server died while serving"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=TIMEOUT)


def test_site_url_makes_links_to_site_pages(lib: Path) -> None:
    service = LibraryService(lib, site_url="https://docs.example.org/skills/")
    whole = service.fetch(FEATURE)
    assert whole["url"] == f"https://docs.example.org/skills/{FEATURE}/"
    assert service.fetch(FEATURE, "triage")["url"] == f"https://docs.example.org/skills/{FEATURE}/#triage"
    reference = service.fetch(f"{FEATURE}/references/notes.md", "pool-sizing")["url"]
    assert reference == f"https://docs.example.org/skills/{FEATURE}/references/notes/#pool-sizing"


def test_cli_usage_errors(lib: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from skillkb.cli import main

    assert main(["--root", str(lib), "mcp", "--port", "70000"]) == 2
    assert main(["--root", str(lib), "mcp", "--site-url", "not a url"]) == 2
    err = capsys.readouterr().err
    assert "--port must be between 0 and 65535" in err and "--site-url must be an http(s) URL" in err
