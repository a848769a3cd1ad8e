"""The built site in a real browser (Debian chromium through playwright): offline, readsets, search, charts.

The site is built into a temp folder and served by a stdlib HTTP server on 127.0.0.1; every request the
browser makes is routed through a recorder that aborts anything not addressed to 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from skillkb import site
from skillkb.api import evaluate, load_or_fail

from conftest import REPO_ROOT

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO_ROOT / "test-artifacts"
ACLGRAPH = "hardware/ascend/ascend-aclgraph-capture-replay"
PINNED = "9bf964cb4b87c8cd0d6852c41a55b3c29711fa95"
WAIT_MS = 10_000
SEARCHES = [  # (query, entry that must be listed first)
    ("207008", ACLGRAPH),
    ("graph capture", ACLGRAPH),
    ("pinned host memory", "hardware/ascend/torchnpu-pinned-host-memory-lifecycle"),
    ("图捕获", ACLGRAPH),
    ("锁页内存", "hardware/ascend/torchnpu-pinned-host-memory-lifecycle"),
    ("sleep mode 休眠", "hardware/ascend/ascend-sleep-mode"),
]


@dataclass
class Recorder:
    """Everything a page did that a static offline site must not do."""

    hosts: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        page.route("**/*", self._route)
        page.on("console", lambda msg: msg.type == "error" and self.problems.append(f"console: {msg.text}"))
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("requestfailed", lambda req: self.problems.append(f"failed: {req.url} {req.failure}"))
        page.on("response", lambda res: res.status >= 400 and self.problems.append(f"HTTP {res.status}: {res.url}"))

    def _route(self, route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        self.hosts.add(host)
        if host != "127.0.0.1":
            self.problems.append(f"outside request: {route.request.url}")
            route.abort()
        else:
            route.continue_()


def eval_results(tmp: Path) -> Path:
    """The committed eval reports; when none is committed yet, a bm25 report run now into ``tmp``."""
    committed = REPO_ROOT / site.RESULTS_DIR
    if list(committed.glob("report-*.json")):
        return committed
    evaluate(REPO_ROOT, retriever="bm25", out=tmp)
    return tmp


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("browser")
    built = site.build_site(REPO_ROOT, tmp / "site", strict=True, results=eval_results(tmp / "results"))
    handler = functools.partial(_QuietHandler, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (bash scripts/setup.sh --all)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=30_000)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser) -> Iterator:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    context.set_default_navigation_timeout(WAIT_MS)
    tab = context.new_page()
    tab.recorder = Recorder()
    tab.recorder.attach(tab)
    yield tab
    context.close()


def visit(page, url: str) -> None:
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle", timeout=WAIT_MS)


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=False)
    assert (ARTIFACTS / name).stat().st_size > 1000


def test_every_page_loads_offline_without_errors(page, base_url: str) -> None:
    library = load_or_fail(REPO_ROOT)
    paths = [""] + [f"{e.id}/" for e in library.sorted_entries()]
    paths += [f"{e.id}/references/{n.removesuffix('.md')}/" for e in library.sorted_entries() for n in e.references]
    assert len(paths) > len(library.entries)
    for path in paths:
        visit(page, base_url + path)
        assert page.locator("article h1").count() == 1, path
        if path == "":
            screenshot(page, "home.png")
    assert page.recorder.problems == []
    assert page.recorder.hosts == {"127.0.0.1"}


def test_aclgraph_page_shows_readsets_at_the_pinned_commit(page, base_url: str) -> None:
    visit(page, base_url + ACLGRAPH + "/")
    entry = load_or_fail(REPO_ROOT).entries[ACLGRAPH]
    pinned_files = next(r for r in entry.meta.readsets if r.commit == PINNED).files
    links = page.locator(f'table a[href^="https://github.com/vllm-project/vllm-ascend/blob/{PINNED}/"]')
    assert links.count() >= len(pinned_files)
    assert links.first.is_visible()
    header = page.locator("table th", has_text="Lines read").first
    header.scroll_into_view_if_needed()
    assert header.is_visible()
    assert page.get_by_text(entry.meta.title_zh, exact=True).first.is_visible()
    page.locator("h2#readsets").scroll_into_view_if_needed()
    screenshot(page, "entry-aclgraph-readsets.png")
    assert page.recorder.problems == []


@pytest.mark.parametrize(("query", "expected"), SEARCHES)
def test_search_lists_the_right_entry_first(page, base_url: str, query: str, expected: str) -> None:
    visit(page, base_url)
    first = search(page, query)
    assert urlsplit(first).path == f"/{expected}/", (query, first)
    if query == "锁页内存":
        screenshot(page, "search-zh.png")
    assert page.recorder.problems == []


def search(page, query: str) -> str:
    """Type into Material's search box and return the first result's link (bounded wait)."""
    box = page.locator("input.md-search__input")
    box.click()
    box.fill(query)
    results = page.locator(".md-search-result__list > li > a")
    deadline = time.monotonic() + WAIT_MS / 1000
    while results.count() == 0 and time.monotonic() < deadline:
        box.press("End")  # the search reacts to key-up; the index may still be loading
        page.wait_for_timeout(200)
    assert results.count() > 0, f"no search results for {query!r}"
    return results.first.get_attribute("href") or ""


def test_dashboard_charts_render(page, base_url: str) -> None:
    visit(page, base_url + "evals/")
    charts = page.locator('article img[src$=".svg"]')
    assert charts.count() >= 3
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        loaded = chart.evaluate("img => img.complete && img.naturalWidth > 0 && img.naturalHeight > 0")
        assert loaded, chart.get_attribute("src")
    assert page.locator("article table").count() >= 4
    assert page.recorder.problems == []


# ------------------------------------------------------------------------ hostile values, real browser

HOSTILE = {  # entry.yaml text -> replacement carrying a payload (each must show as text, never run)
    "title: Demo demo-feature": "title: 'Pools & [x](javascript:alert(1)) {onclick=alert(2)} *b*'",
    "title_zh: 演示条目": "title_zh: '演示 [y](javascript:alert(3)) {onmouseover=alert(4)}'",
    "evidence: Nothing ran; a log from real hardware would raise it.": (
        "evidence: '<script>alert(5)</script><img src=x onerror=alert(6)>'"
    ),
    "scope: the pool": "scope: '<svg onload=alert(7)> <details open ontoggle=alert(8)>'",
    "cross_refs: []": (
        "cross_refs:\n  - {id: hardware/ascend/demo-constraint, relation: see-also,\n"
        "     note: '<input autofocus onfocus=alert(9)>'}\nstatus_note_unused: null"
    ),
}


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from conftest import write_library

    root = write_library(tmp_path_factory.mktemp("hostile") / "lib")
    meta = root / "hardware/ascend/demo-feature/entry.yaml"
    text = meta.read_text(encoding="utf-8")
    for old, new in HOSTILE.items():
        text = text.replace(old, new.replace("\nstatus_note_unused: null", ""))
    meta.write_text(text, encoding="utf-8")
    config = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = (REPO_ROOT / "tools" / "skillkb" / "site_hooks.py").as_posix()
    (root / "mkdocs.yml").write_text(config.replace("tools/skillkb/site_hooks.py", hooks), encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# Hostile demo\n\nHome.\n", encoding="utf-8")
    built = site.build_site(root, root.parent / "site", strict=True)
    handler = functools.partial(_QuietHandler, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_hostile_entry_values_fire_no_dialog(page, hostile_url: str) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    paths = ["", "hardware/ascend/demo-feature/", "topics/", "versions/", "evals/", "hardware/ascend/demo-constraint/"]
    for path in paths:
        visit(page, hostile_url + path)
        page.mouse.move(400, 300)  # hover and focus handlers would fire now
        page.keyboard.press("Tab")
        page.wait_for_timeout(300)
    visit(page, hostile_url + "hardware/ascend/demo-feature/")
    assert page.get_by_text("<script>alert(5)</script>", exact=False).first.is_visible()
    assert page.locator("article h1").count() == 1
    assert dialogs == []
    assert page.evaluate("() => document.querySelectorAll('[onerror],[onload],[onclick],[onfocus]').length") == 0
