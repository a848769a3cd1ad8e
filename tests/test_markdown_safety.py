"""Markdown safety: ``validate``, ``docs build`` and ``export`` refuse the same entry Markdown.

Every payload here was accepted by ``validate`` (and handed out by ``export``) while only the site build's
rendered-page check caught it: attribute lists, raw tags with ``/`` or a line break before an attribute,
code spans that are not code spans, control characters inside a scheme, protocol-relative links.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillkb import cli, htmlsafety
from skillkb.api import load_or_fail, validate
from skillkb.diagnostics import Diagnostic, SkillkbError, errors_only
from skillkb.export import export

from conftest import REPO_ROOT, prepare_site

FEATURE = "hardware/ascend/demo-feature"
REFERENCE = f"{FEATURE}/references/notes.md"
SAFETY_CODES = {"unsafe-html", "unsafe-link", "link-escape", "markdown-pipeline"}
TIMEOUT = 120

PAYLOADS = {
    "attr-list-heading": '## Heading {: onclick="alert(1)"}',
    "attr-list-link-href": '[x](https://a.example){: href="javascript:alert(1)"}',
    "attr-list-paragraph": "A paragraph.\n{: onmouseover=alert(1) }",
    "attr-list-image": "![](https://a.example/x.png){: onerror=alert(1)}",
    "slash-before-attribute": "<b/onclick=alert(1)>bold</b>",
    "slash-on-void-tag": "Line<br/onmouseover=alert(1)>break",
    "attribute-on-next-line": "Line<br\nonmouseover=alert(1)>break",
    "escaped-backticks": "Not code: \\`<img src=x onerror=alert(1)>\\`",
    # The old source check paired the last two backticks; the renderer closes ``a```b`` and leaves `` open.
    "unbalanced-backtick": "Run ``a```b`` then <img src=x onerror=alert(1)> and `` alone.",
    "tab-in-scheme": "[x](java\tscript:alert(1))",
    "protocol-relative": "[x](//evil.example.com)",
}

LEGITIMATE = """
## 安装与排错（中文标题）

Line one<br>line two, H<sub>2</sub>O, x<sup>2</sup>, <kbd>Ctrl</kbd>+<kbd>C</kbd>, <b>bold</b>, <i>it</i>,
<em>em</em>, <strong>strong</strong>, <code>code</code>, <s>s</s>, <del>del</del>, <ins>ins</ins>,
<mark>mark</mark>; `<script>alert(1)</script>` and ``a `<img src=x onerror=alert(1)>` b`` are code;
a < b && c > d; &amp; &lt;tag&gt;.

| Symptom | Fix |
|:---|---:|
| `<b onclick=x>` in a cell | <code>escape</code> it |

```html
<script>alert(1)</script>
<img src=x onerror=alert(1)>
```

~~~
<div onclick="alert(1)">tilde fence</div>
~~~

!!! note "A note"

    See [the notes](references/notes.md#size), [https](https://example.com/a?b=c&d=e),
    [http](http://example.com), [mail](mailto:team@example.com), <https://example.com/auto> and
    [a heading](#安装与排错中文标题).

- a list item with `code <span>` and an [anchor](#triage)
"""


def write_reference(root: Path, text: str = "# Notes\n\nSize the pool.\n") -> Path:
    refs = root / FEATURE / "references"
    refs.mkdir(exist_ok=True)
    path = refs / "notes.md"
    path.write_text(text, encoding="utf-8")
    return path


def plant(root: Path, payload: str, where: str) -> str:
    """Put ``payload`` into the SKILL.md body or a references file; return the file it is in."""
    if where == "skill":
        skill = root / FEATURE / "SKILL.md"
        skill.write_text(skill.read_text(encoding="utf-8") + "\n" + payload + "\n", encoding="utf-8")
        write_reference(root)
        return f"{FEATURE}/SKILL.md"
    write_reference(root, "# Notes\n\nSize the pool.\n\n" + payload + "\n\nBack to [the skill](../SKILL.md).\n")
    return REFERENCE


def safety_errors(root: Path) -> list[Diagnostic]:
    return [d for d in errors_only(validate(root)) if d.code in SAFETY_CODES]


def skillkb(root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "skillkb.cli", "--root", str(root), *args]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False)


CASES = [pytest.param(p, w, id=f"{name}-{w}") for name, p in PAYLOADS.items() for w in ("skill", "reference")]


# ------------------------------------------------------------------------------------------ validate


@pytest.mark.parametrize(("payload", "where"), CASES)
def test_validate_refuses_the_payload(library_root: Path, payload: str, where: str) -> None:
    file = plant(library_root, payload, where)
    errors = [d for d in safety_errors(library_root) if d.file == file]
    assert errors, payload
    for diag in errors:
        assert diag.code in {"unsafe-html", "unsafe-link"} and diag.message and diag.fix, diag


@pytest.mark.parametrize(("payload", "where"), CASES)
def test_the_source_only_fallback_refuses_the_payload_too(
    library_root: Path, payload: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Python-Markdown (a base install) the source check still refuses every payload."""
    monkeypatch.setattr(htmlsafety, "site_renderer", lambda: None)
    file = plant(library_root, payload, where)
    assert [d for d in safety_errors(library_root) if d.file == file], payload


def test_diagnostics_name_the_line(library_root: Path) -> None:
    skill = library_root / FEATURE / "SKILL.md"
    before = skill.read_text(encoding="utf-8").count("\n")
    plant(library_root, "<b/onclick=alert(1)>x</b>\n\n## Later {: onclick=alert(1)}", "skill")
    lines = {d.line for d in safety_errors(library_root)}
    assert lines == {before + 2, before + 4}, lines
    rendered = [d.render() for d in safety_errors(library_root)]
    assert all(f"{FEATURE}/SKILL.md:" in r and "(fix: " in r for r in rendered), rendered


def test_a_relative_link_set_by_an_attribute_list_may_not_leave_the_entry(library_root: Path) -> None:
    plant(library_root, '[x](references/notes.md){: href="../../../../etc/passwd"}', "skill")
    assert {d.code for d in safety_errors(library_root)} == {"link-escape"}


def test_a_markdown_pipeline_other_than_the_checked_one_is_refused(library_root: Path) -> None:
    prepare_site(library_root)
    assert not safety_errors(library_root)
    config = library_root / "mkdocs.yml"
    config.write_text(
        config.read_text(encoding="utf-8").replace("  - attr_list\n", "  - attr_list\n  - pymdownx.magiclink\n"),
        encoding="utf-8",
    )
    found = safety_errors(library_root)
    assert [d.code for d in found] == ["markdown-pipeline"] and found[0].file == "mkdocs.yml", found


# ---------------------------------------------------------------------------------------- docs build


@pytest.mark.parametrize(("payload", "where"), CASES)
def test_docs_build_refuses_the_payload(library_root: Path, tmp_path: Path, payload: str, where: str) -> None:
    prepare_site(library_root)
    plant(library_root, payload, where)
    result = skillkb(library_root, "docs", "build", "--site-dir", str(tmp_path / "site"))
    assert result.returncode == 1, result.stdout + result.stderr
    # refused by validate's check before anything renders, not only by the rendered-page hook
    assert "`skillkb validate` refuses" in result.stderr, result.stderr
    assert "unsafe-html" in result.stderr or "unsafe-link" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "site" / FEATURE).exists()


# -------------------------------------------------------------------------------------------- export


@pytest.mark.parametrize(("payload", "where"), CASES)
def test_export_refuses_the_payload_and_writes_nothing(
    library_root: Path, tmp_path: Path, payload: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(library_root, payload, where)
    target = tmp_path / "skills"
    assert cli.main(["--root", str(library_root), "export", "--target", str(target)]) != 0
    err = capsys.readouterr().err
    assert "nothing was written" in err and ("unsafe-html" in err or "unsafe-link" in err), err
    assert not target.exists()
    with pytest.raises(SkillkbError):
        export(load_or_fail(library_root), target)
    assert not target.exists()


# ----------------------------------------------------------------------------------- what must pass


def test_legitimate_markdown_passes_everywhere(library_root: Path, tmp_path: Path) -> None:
    prepare_site(library_root)
    plant(library_root, LEGITIMATE, "skill")
    write_reference(library_root, "# Notes\n\n## Size\n\nBack to [the skill](../SKILL.md#triage).\n" + LEGITIMATE)
    assert safety_errors(library_root) == []
    report = export(load_or_fail(library_root), tmp_path / "skills")
    assert "demo-feature" in report.written
    result = skillkb(library_root, "docs", "build", "--site-dir", str(tmp_path / "site"))
    assert result.returncode == 0, result.stderr


def test_the_real_library_has_no_markdown_safety_error(monkeypatch: pytest.MonkeyPatch) -> None:
    assert safety_errors(REPO_ROOT) == []
    monkeypatch.setattr(htmlsafety, "site_renderer", lambda: None)  # and a base install agrees
    assert safety_errors(REPO_ROOT) == []


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ('<div markdown="1">\n*x*\n</div>', "unsafe-html"),
        ("[unused]: java&#115;cript:alert(1)", "unsafe-link"),
        ("[x](%2e%2e/%2e%2e/%2e%2e/other/SKILL.md)", "link-escape"),
        ("[x](\\\\evil.example.com)", "link-escape"),
        ('[x](https://a.example){: formaction="javascript:alert(1)"}', "unsafe-html"),
    ],
)
def test_other_ways_around_the_rule_are_refused(library_root: Path, payload: str, code: str) -> None:
    plant(library_root, payload, "skill")
    assert code in {d.code for d in safety_errors(library_root)}, payload


@pytest.mark.parametrize(
    "target", ["//evil.example.com", "\\\\evil.example.com", "/\\evil.example.com", " //evil", "java\tscript:x"]
)
def test_url_problem_refuses_protocol_relative_and_hidden_schemes(target: str) -> None:
    assert htmlsafety.url_problem(target)


@pytest.mark.parametrize("target", ["https://a.example/x", "mailto:a@b.example", "references/x.md", "#anchor", "x.md"])
def test_url_problem_accepts_allowed_targets(target: str) -> None:
    assert htmlsafety.url_problem(target) is None


# ------------------------------------------------------------- other claims docs/security.md makes


def test_the_mcp_http_app_refuses_a_foreign_host_and_origin(library_root: Path) -> None:
    """DNS-rebinding checks: a foreign Host gets 421, a foreign Origin 403 (the app as serve_http builds it)."""
    from starlette.testclient import TestClient

    from skillkb.mcp_server import HTTP_HOST, HTTP_PATH, build_server

    app = build_server(library_root).streamable_http_app(streamable_http_path=HTTP_PATH, host=HTTP_HOST)
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.post(HTTP_PATH, json=hello, headers=accept).status_code == 200
        assert client.post(HTTP_PATH, json=hello, headers={**accept, "Host": "evil.example.com"}).status_code == 421
        foreign = {**accept, "Origin": "https://evil.example.com"}
        assert client.post(HTTP_PATH, json=hello, headers=foreign).status_code == 403
