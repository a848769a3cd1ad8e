"""Robustness gaps: links and odd files in docs/, large YAML, stale temp files, signals on stdio MCP,
reserved topic names, verify flags that match nothing, an empty rules file, list/show with a broken entry,
and CRLF/BOM files that must be reported once, without follow-on errors."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from skillkb import yamlsrc
from skillkb.api import validate
from skillkb.fsutil import atomic_write
from skillkb.yamlsrc import YamlProblem, parse_yaml

from conftest import prepare_site

FEATURE = "hardware/ascend/demo-feature"
MECHANISM = "repositories/vllm/demo-mechanism"
CONSTRAINT = "hardware/ascend/demo-constraint"
SECRET = "TOP-SECRET-REPOSITORY-CONFIG"
TIMEOUT = 60


def skillkb(root: Path, *args: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess (a hang becomes a test failure, not a stuck suite)."""
    command = [sys.executable, "-m", "skillkb.cli", "--root", str(root), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def errors(root: Path) -> list:
    return [d for d in validate(root) if d.severity == "error"]


def plant_secret(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text(f"[remote]\n  token = {SECRET}\n")


# ------------------------------------------------------------------------------ 1. links in docs/


def test_a_symlink_in_docs_is_a_validate_error(library_root: Path) -> None:
    plant_secret(library_root)
    (library_root / "docs").mkdir()
    (library_root / "docs" / "leak.md").symlink_to(Path("../.git/config"))
    found = [d for d in errors(library_root) if d.code == "symlink"]
    assert [d.file for d in found] == ["docs/leak.md"] and all(d.fix for d in found)


def test_a_linked_docs_folder_and_a_fifo_in_docs_are_errors(library_root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (library_root / "docs").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert "docs" in [d.file for d in errors(library_root) if d.code == "symlink"]
    (library_root / "docs").unlink()
    (library_root / "docs").mkdir()
    os.mkfifo(library_root / "docs" / "pipe.md")  # mkdocs would block reading it
    assert "docs/pipe.md" in [d.file for d in errors(library_root) if d.code == "not-regular-file"]


def test_docs_build_refuses_a_symlink_in_docs(library_root: Path, tmp_path: Path) -> None:
    plant_secret(library_root)
    prepare_site(library_root, home=False)
    (library_root / "docs" / "leak.md").symlink_to(Path("../.git/config"))
    site = tmp_path / "site"
    result = skillkb(library_root, "docs", "build", "--site-dir", str(site), timeout=180)
    assert result.returncode != 0 and "docs/leak.md" in result.stderr and "Traceback" not in result.stderr
    published = [p.read_bytes() for p in site.rglob("*") if p.is_file()] if site.exists() else []
    assert not any(SECRET.encode() in data for data in published)


# ------------------------------------------------------------------------------ 2. large YAML


def test_an_oversized_entry_yaml_names_entry_yaml_in_its_fix(library_root: Path) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    flow = "x_big: [" + ", ".join(["item"] * 20_000) + "]\n"  # ~120 KiB, over the 64 KiB cap
    meta.write_text(meta.read_text() + flow)
    (diag,) = [d for d in errors(library_root) if d.code == "file-too-large"]
    assert diag.file == f"{FEATURE}/entry.yaml" and "65536" in diag.message
    assert "entry.yaml" in diag.fix and "SKILL.md" not in diag.fix


def test_an_oversized_frontmatter_is_refused_before_it_is_parsed(library_root: Path) -> None:
    skill = library_root / FEATURE / "SKILL.md"
    flow = "metadata: {big: [" + ", ".join(["item"] * 5_000) + "]}\n"  # ~30 KiB of frontmatter
    skill.write_text(skill.read_text().replace("license: Apache-2.0\n", "license: Apache-2.0\n" + flow))
    (diag,) = [d for d in errors(library_root) if d.file == f"{FEATURE}/SKILL.md"]
    assert diag.code == "frontmatter-too-large" and diag.line == 1 and "SKILL.md" in diag.fix


def test_the_c_parser_is_used_when_pyyaml_has_libyaml() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert yamlsrc.LOADER is expected


@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_both_parsers_keep_positions_and_refusals(monkeypatch: pytest.MonkeyPatch, loader) -> None:
    monkeypatch.setattr(yamlsrc, "LOADER", loader)
    parsed = parse_yaml("a: 1\nb:\n  - x\n  - {c: 'q', d: 007}\n", line_offset=1)
    assert parsed.data == {"a": 1, "b": ["x", {"c": "q", "d": 7}]}
    assert parsed.line_of(("b", 1, "d")) == 5 and parsed.line_of(("a",)) == 2
    assert parsed.plain_scalars[("b", 1, "d")] == "007" and ("b", 1, "c") not in parsed.plain_scalars
    assert parsed.flow_paths == [("b", 1)]
    assert parse_yaml("").data is None
    refused = {
        "x: &a [1]\ny: *a\n": "anchors and aliases",
        "a: 1\na: 2\n": "written twice",
        "d: " + "[" * 40 + "]" * 40 + "\n": "nests deeper",
        "d: " + "[" * 2000 + "]" * 2000 + "\n": "nests deeper",  # past libyaml's own bound too
        "a: [unclosed\n": "does not parse",
        "--- 1\n--- 2\n": "does not parse",
        "a: !!python/object:os.system x\n": "does not parse",
    }
    for text, fragment in refused.items():
        with pytest.raises(YamlProblem, match=fragment):
            parse_yaml(text)


# ------------------------------------------------------------------------------ 3. stale temp files


def test_atomic_write_cleans_old_temp_files_of_its_own_pattern_only(tmp_path: Path) -> None:
    target = tmp_path / "skill-index.json"
    hours_ago = time.time() - 2 * 3600

    def temp(name: str, old: bool) -> Path:
        path = tmp_path / name
        path.write_text("half")
        if old:
            os.utime(path, (hours_ago, hours_ago))
        return path

    old_scheme = temp(".skill-index.json.k2j4h5gq.tmp", old=True)  # written before temp names held a pid
    live_pid = temp(".skill-index.json.1.abcdefgh.tmp", old=True)  # pid 1 always runs
    fresh = temp(".skill-index.json.k2j4h5gz.tmp", old=False)  # may still be in flight
    others = [
        temp(name, old=True)
        for name in (".other.json.k2j4h5gq.tmp", ".skill-index.json.k2j4h5gq.tmp.bak", "skill-index.json.tmp")
    ]
    (tmp_path / ".skill-index.json.dirdirdi.tmp").mkdir()
    atomic_write(target, b"{}\n")
    assert not old_scheme.exists() and not live_pid.exists()
    assert fresh.exists() and all(p.exists() for p in others)
    assert (tmp_path / ".skill-index.json.dirdirdi.tmp").is_dir()


# ------------------------------------------------------------------------------ 4. stdio MCP signals


def _lines(stream, out: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        out.put(line)
    out.put(None)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_mcp_stdio_stops_cleanly_on_a_signal(library_root: Path, signum: int) -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    proc = subprocess.Popen(
        [sys.executable, "-m", "skillkb.cli", "--root", str(library_root), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue = queue.Queue()
    assert proc.stdin is not None and proc.stdout is not None
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        params = {
            "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1],
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        }
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) + "\n")
        proc.stdin.flush()
        first = lines.get(timeout=TIMEOUT)  # the server is serving: stdin is being read
        assert first is not None and json.loads(first)["id"] == 1
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0  # stdin is still open
        while (line := lines.get(timeout=TIMEOUT)) is not None:
            assert json.loads(line)["jsonrpc"] == "2.0"  # nothing but protocol messages
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
        proc.stdin.close()


# ------------------------------------------------------------------------------ 5. reserved topics


def test_the_topic_name_index_is_reserved(library_root: Path) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    meta.write_text(meta.read_text().replace("cross_refs: []", "topics: [pools, index]\ncross_refs: []"))
    (diag,) = [d for d in errors(library_root) if d.file == f"{FEATURE}/entry.yaml"]
    assert diag.code == "meta-schema" and diag.field == "topics.1" and "reserved" in diag.message
    assert diag.line == meta.read_text().splitlines().index("topics: [pools, index]") + 1


# ------------------------------------------------------------------------------ 6. verify --clone


def test_verify_names_the_repos_when_a_clone_matches_no_readset(library_root: Path, tmp_path: Path) -> None:
    result = skillkb(library_root, "readsets", "verify", "--clone", f"nosuch/repo={tmp_path}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "nosuch/repo" in result.stderr and "no readset" in result.stderr and "acme/widget" in result.stderr


# ------------------------------------------------------------------------------ 7. empty rules


@pytest.mark.parametrize(
    ("text", "fragment"), [("", "is empty"), ("# only a comment\n", "is empty"), ("- a\n", "not a mapping")]
)
def test_an_empty_or_non_mapping_rules_file_is_a_diagnostic(library_root: Path, text: str, fragment: str) -> None:
    (library_root / "schemas" / "tier-rules.yaml").write_text(text)
    result = skillkb(library_root, "validate")
    assert result.returncode == 1 and "Traceback" not in result.stderr and "NoneType" not in result.stderr
    assert "schemas/tier-rules.yaml" in result.stderr and fragment in result.stderr and "fix:" in result.stderr


# ------------------------------------------------------------------------------ 8. list/show degrade


def test_list_and_show_serve_the_valid_entries_when_one_is_broken(library_root: Path) -> None:
    (library_root / CONSTRAINT / "entry.yaml").write_text("id: [unclosed\n")
    listed = skillkb(library_root, "list")
    assert listed.returncode == 0 and FEATURE in listed.stdout and MECHANISM in listed.stdout
    assert CONSTRAINT not in listed.stdout and "2 entries" in listed.stdout
    assert f"{CONSTRAINT}/entry.yaml" in listed.stderr
    as_json = skillkb(library_root, "list", "--json")
    assert as_json.returncode == 0 and {r["id"] for r in json.loads(as_json.stdout)} == {FEATURE, MECHANISM}
    shown = skillkb(library_root, "show", MECHANISM)
    assert shown.returncode == 0 and shown.stdout.startswith(MECHANISM)
    broken = skillkb(library_root, "show", "demo-constraint")
    assert broken.returncode == 1 and f"{CONSTRAINT}/entry.yaml" in broken.stderr and "[meta-yaml]" in broken.stderr
    assert broken.stdout == "" and "Traceback" not in broken.stderr
    unknown = skillkb(library_root, "show", "nope")
    assert unknown.returncode == 2 and "`skillkb list`" in unknown.stderr


# ------------------------------------------------------------------------------ 9. CRLF and BOM once


def make_feature_covered(root: Path) -> None:
    """Lower the covered gates so the demo entry meets them, and mark it covered."""
    rules = root / "schemas" / "tier-rules.yaml"
    rules.write_text(
        rules.read_text().replace(
            "canonical: {cited_facts: 15, triage_rows: 6, eval_cases: 8}",
            "canonical: {cited_facts: 3, triage_rows: 1, eval_cases: 1}",
        )
    )
    meta = root / FEATURE / "entry.yaml"
    meta.write_text(meta.read_text().replace("state: candidate", "state: covered"))


@pytest.mark.parametrize(
    ("damage", "code"),
    [(lambda data: data.replace(b"\n", b"\r\n"), "file-crlf"), (lambda data: b"\xef\xbb\xbf" + data, "file-bom")],
    ids=["crlf", "bom"],
)
@pytest.mark.parametrize("file", ["SKILL.md", "entry.yaml"])
def test_crlf_and_bom_are_reported_once_without_follow_on_errors(
    library_root: Path, damage, code: str, file: str
) -> None:
    make_feature_covered(library_root)
    assert errors(library_root) == [], "the covered fixture must start valid"
    path = library_root / FEATURE / file
    path.write_bytes(damage(path.read_bytes()))
    assert [(d.file, d.code) for d in errors(library_root)] == [(f"{FEATURE}/{file}", code)]


def test_a_stop_asked_before_the_http_server_started_ends_it(library_root: Path) -> None:
    """SIGTERM between start-up and uvicorn taking the signals must not be lost (it used to be raised as
    SystemExit at an arbitrary point, where a finalizer could swallow it and the server kept serving)."""
    from skillkb.mcp_server import EarlyStop, build_server, serve_http

    early = EarlyStop()
    early(15, None)  # the stop arrives before serve_http
    done = threading.Event()
    watchdog = threading.Timer(30, lambda: None if done.is_set() else os.kill(os.getpid(), 9))
    watchdog.start()
    try:
        serve_http(build_server(library_root), 0, early)  # returns: uvicorn saw should_exit at start-up
    finally:
        done.set()
        watchdog.cancel()
    assert early.asked
