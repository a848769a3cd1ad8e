"""The documentation site: pages generated from the entries, the eval dashboard, and real mkdocs builds."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from skillkb import cli, site
from skillkb.api import load_or_fail
from skillkb.index import build_index
from skillkb.validate import missing_gates

from conftest import DEMO_COMMIT, REPO_ROOT, prepare_site

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")

FEATURE = "hardware/ascend/demo-feature"
ACLGRAPH = "hardware/ascend/ascend-aclgraph-capture-replay"


def add_cross_ref_and_reference(root: Path) -> None:
    meta = root / FEATURE / "entry.yaml"
    text = meta.read_text(encoding="utf-8").replace(
        "cross_refs: []",
        "topics: [pools]\ncross_refs:\n  - {id: hardware/ascend/demo-constraint, relation: builds-on, note: allocator}",
    )
    meta.write_text(text, encoding="utf-8")
    refs = root / FEATURE / "references"
    refs.mkdir()
    (refs / "deep-dive.md").write_text(
        "# Pool deep dive\n\nThe pool grows [widget@0123456:src/pool.py#L4-L6].\n", encoding="utf-8"
    )


def report(retriever: str, cases: list[dict]) -> dict:
    metrics = {m: 0.5 for m in site.DASHBOARD_METRICS} | {"cases": float(len(cases))}
    return {
        "retriever": retriever,
        "k": 10,
        "metrics": metrics,
        "by_lang": {"en": metrics, "zh": metrics},
        "by_split": {"test": metrics},
        "cases": cases,
    }


def case(case_id: str, expected: list[str], hit_rank: int | None, lang: str = "en") -> dict:
    ranked = ["hardware/ascend/demo-constraint", FEATURE]
    return {
        "id": case_id,
        "query": f"query {case_id} | pipe",
        "lang": lang,
        "split": "test",
        "expected": expected,
        "ranked": ranked,
        "abstained": False,
        "hit_rank": hit_rank,
        "latency_ms": 1.0,
        "passed": hit_rank == 1,
    }


# -------------------------------------------------------------------------------------- generation


def test_citations_link_to_the_pinned_commit_and_lines(library_root: Path) -> None:
    library = load_or_fail(library_root)
    readsets = library.entries[FEATURE].meta.readsets
    warnings: list[str] = []
    text = (
        "Fact [widget@0123456:src/pool.py#L2-L4] and [widget@0123456:src/pool.py#L7].\n"
        "```\n[widget@0123456:src/pool.py#L1-L2]\n```\n"
        "Bad [widget@fffffff:src/pool.py#L1-L2]."
    )
    out = site.link_citations(text, readsets, warnings.append, "demo/SKILL.md")
    base = f"https://github.com/acme/widget/blob/{DEMO_COMMIT}/src/pool.py"
    assert f"[`widget@0123456:src/pool.py#L2-L4`]({base}#L2-L4)" in out
    assert f"({base}#L7)" in out
    assert "```\n[widget@0123456:src/pool.py#L1-L2]\n```" in out  # code stays code
    assert "Bad [widget@fffffff:src/pool.py#L1-L2]." in out
    assert len(warnings) == 1 and "widget@fffffff" in warnings[0] and "demo/SKILL.md" in warnings[0]


def test_entry_page_has_panel_readsets_and_chinese_title(library_root: Path) -> None:
    add_cross_ref_and_reference(library_root)
    library = load_or_fail(library_root)
    pages = site.generate(library).pages
    page = pages[f"{FEATURE}/index.md"]
    entry = library.entries[FEATURE]
    digest = next(r.digest for r in build_index(library).entries if r.id == FEATURE)
    assert page.startswith("# demo-feature\n")
    assert "**演示条目**" in page.split("!!! info", 1)[0]  # Chinese title above the panel
    for gate in missing_gates(entry, library):
        assert site.cell(gate) in page  # shown as text: "1 &lt; 4" renders as "1 < 4"
    assert "2 — vLLM Ascend plugin features" in page
    assert "`hardware/ascend`" in page and "`candidate`" in page and "`not_run`" in page
    assert "Nothing ran; a log from real hardware would raise it." in page
    assert "vllm_ascend `v0.25.1rc1`" in page and "torch_npu `2.10.0.post2`" in page
    assert f"`{digest}`" in page
    assert "*builds-on* [Demo demo-constraint](../demo-constraint/index.md) (allocator)" in page
    assert "[pools](../../../topics/pools.md)" in page
    row = f"| [`src/pool.py`](https://github.com/acme/widget/blob/{DEMO_COMMIT}/src/pool.py) | `222222222222` | 1-30 |"
    assert row in page and page.count("| verified |") == 1
    assert f"[`{DEMO_COMMIT}`](https://github.com/acme/widget/tree/{DEMO_COMMIT}) · tag `v1.0.0`" in page
    assert f"https://github.com/acme/widget/blob/{DEMO_COMMIT}/src/pool.py#L1-L3" in page  # body citation
    assert "## 中文摘要" in page and "[deep-dive.md](references/deep-dive.md)" in page


def test_reference_pages_topics_and_nav(library_root: Path) -> None:
    add_cross_ref_and_reference(library_root)
    out = site.generate(load_or_fail(library_root), docs_present={"index.md", "tiers.md"})
    ref = out.pages[f"{FEATURE}/references/deep-dive.md"]
    assert ref.startswith("# Pool deep dive\n")
    assert f"blob/{DEMO_COMMIT}/src/pool.py#L4-L6" in ref and "](../index.md)" in ref
    assert "[Demo demo-feature](../hardware/ascend/demo-feature/index.md)" in out.pages["topics/pools.md"]
    skills = next(item["Skills"] for item in out.nav if "Skills" in item)
    tier2 = next(group[site.TIER_TITLES[2]] for group in skills if site.TIER_TITLES[2] in group)
    feature = next(item["Demo demo-feature"] for item in tier2 if "Demo demo-feature" in item)
    assert feature == [f"{FEATURE}/index.md", {"deep-dive": f"{FEATURE}/references/deep-dive.md"}]
    assert {"Tiers and ownership": "tiers.md"} in out.nav and {"Authoring an entry": "authoring.md"} not in out.nav
    # The coverage pages another tool writes stand in as placeholders until they exist in docs/.
    assert "Not generated yet" in out.pages["upstream-drift.md"] and "index.md" not in out.pages


def test_version_matrix_and_tier_table(library_root: Path) -> None:
    library = load_or_fail(library_root)
    matrix = site.versions_markdown(library)
    row = next(line for line in matrix.split("\n") if "demo-mechanism" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == ["1", "—", "`v0.25.1`", "—", "`2.10.0`", "—"]
    table = site.tier_table(library)
    assert table.index("demo-mechanism") < table.index("demo-feature") < table.index("demo-constraint")


def test_dashboard_tables_failing_cases_and_charts(tmp_path: Path, library_root: Path) -> None:
    library = load_or_fail(library_root)
    results = tmp_path / "results"
    results.mkdir()
    cases = [case("a-1", [FEATURE], 1), case("a-2", [FEATURE], 2, "zh"), case("oos-1", [], None)]
    (results / "report-bm25.json").write_text(json.dumps(report("bm25", cases)), encoding="utf-8")
    (results / "report-broken.json").write_text("{not json", encoding="utf-8")
    warnings: list[str] = []
    out = site.generate(library, results, warnings.append)
    page = out.pages["evals/index.md"]
    assert len(warnings) == 1 and "report-broken.json" in warnings[0]
    assert site.entry_hit_rates(report("bm25", cases)) == {FEATURE: (1, 2)}
    assert "1/2 (50%)" in page and "1 failing case(s) of 3" not in page and "2 failing case(s) of 3" in page
    assert "`a-2`" in page and "`a-1` |" not in page and "query a-2 \\| pipe" in page
    assert "![Metrics by retriever](metrics.svg)" in page
    assert sorted(out.assets) == ["evals/entries.svg", "evals/languages.svg", "evals/metrics.svg"]
    svg = out.assets["evals/metrics.svg"].decode()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "<dc:date>" not in svg
    assert site.render_charts([report("bm25", cases)]) == site.render_charts([report("bm25", cases)])


def test_dashboard_without_reports(tmp_path: Path, library_root: Path) -> None:
    out = site.generate(load_or_fail(library_root), tmp_path / "missing")
    assert "No eval report is committed yet" in out.pages["evals/index.md"] and out.assets == {}


# ------------------------------------------------------------------------------------------ builds


def test_fixture_library_builds_strict_and_fails_on_bad_citation(tmp_path: Path, library_root: Path) -> None:
    prepare_site(library_root)
    add_cross_ref_and_reference(library_root)
    out = tmp_path / "site"
    assert cli.main(["--root", str(library_root), "docs", "build", "--strict", "--site-dir", str(out)]) == 0
    html = (out / FEATURE / "index.html").read_text(encoding="utf-8")
    assert f'href="https://github.com/acme/widget/blob/{DEMO_COMMIT}/src/pool.py#L1-L3"' in html
    assert (out / FEATURE / "references" / "deep-dive" / "index.html").is_file()
    assert not (library_root / "docs" / "hardware").exists()  # nothing generated lands in docs/
    skill = library_root / FEATURE / "SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "\nLost [widget@0123456:src/missing.py#L1-L2].\n")
    assert cli.main(["--root", str(library_root), "docs", "build", "--strict", "--site-dir", str(out)]) == 1


def test_build_refuses_a_library_that_does_not_load(tmp_path: Path, library_root: Path, capsys) -> None:
    prepare_site(library_root)
    (library_root / FEATURE / "entry.yaml").write_text("id: [unclosed\n", encoding="utf-8")
    assert cli.main(["--root", str(library_root), "docs", "build", "--site-dir", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err
    assert f"{FEATURE}/entry.yaml" in err and "does not load" in err and "Traceback" not in err


def test_real_site_builds_strict_and_deterministically(tmp_path: Path) -> None:
    if not (REPO_ROOT / "mkdocs.yml").is_file():
        pytest.fail("mkdocs.yml is missing at the repository root")
    first = site.build_site(REPO_ROOT, tmp_path / "one", strict=True)
    second = site.build_site(REPO_ROOT, tmp_path / "two", strict=True)
    page = Path(ACLGRAPH) / "index.html"
    html = (first / page).read_bytes()
    assert html == (second / page).read_bytes()
    assert b'href="https://github.com/vllm-project/vllm-ascend/blob/9bf964cb4b87c8cd0d6852c41a55b3c29711fa95/' in html
    for name in ("versions", "evals", "topics", "upstream-drift", "reference-matrix", "skill-coverage", "ownership"):
        assert (first / name / "index.html").is_file(), name
    for svg in sorted((first / "evals").glob("*.svg")):
        assert svg.read_bytes() == (second / "evals" / svg.name).read_bytes()
    assert not list((REPO_ROOT / "docs").glob("hardware*"))
    shutil.rmtree(tmp_path)


def test_the_evaluation_page_shows_the_fresh_questions_when_the_reports_have_them() -> None:
    fresh = {"hit@1": 0.5, "hit@3_any": 0.75, "mrr@10": 0.6, "oos_abstention": 0.4, "false_abstention": 0.05}
    with_fresh = {"retriever": "combined", "test_by_tag": {"round3": fresh, "title": {}}}
    parts = site._fresh([with_fresh, {"retriever": "bm25"}])
    assert len(parts) == 2 and "round 3" in parts[0]
    assert "`combined`" in parts[1] and "0.500" in parts[1] and "`bm25`" not in parts[1]
    assert site._fresh([{"retriever": "bm25", "test_by_tag": {"title": fresh}}]) == []
    older = {**fresh, "hit@1": 0.25}
    rounds = {"round3": older, "round4": fresh, "round10": fresh}
    newest = site._fresh([{"retriever": "combined", "test_by_tag": rounds}])
    assert "round 10" in newest[0] and "0.500" in newest[1] and "0.250" not in newest[1]


def test_the_evaluation_page_shows_the_ceiling_study_when_recorded(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    assert site._ceiling(path) == []  # not recorded: no section
    figures = {"hit@1": 0.8, "hit@3_any": 0.95, "oos_abstention": None, "false_abstention": 0.05}
    row = {"questions": "<script>x</script>", "in_scope": 3, "uncovered": 0, "judges": figures, "search": figures}
    path.write_text(json.dumps({"rows": [row]}), encoding="utf-8")
    intro, rendered = site._ceiling(path)
    assert "question text supports" in intro
    assert "judges" in rendered and "search, cross-fitted" in rendered and "0.800" in rendered and "—" in rendered
    assert "<script>" not in rendered, "text from the file is data, never markup"
    assert "judge reads its hits" not in rendered  # a summary recorded before the third router
    read = {**figures, "hit@1": 0.875}
    path.write_text(json.dumps({"rows": [row | {"reader_in_loop": read}]}), encoding="utf-8")
    _, rendered = site._ceiling(path)
    assert "search, then a judge reads its hits" in rendered and "0.875" in rendered
    path.write_text("{not json", encoding="utf-8")
    (warning,) = site._ceiling(path)
    assert warning.startswith("!!! warning") and "unreadable" in warning


def test_the_evaluation_page_shows_the_agent_reader_study_when_recorded(tmp_path: Path) -> None:
    path = tmp_path / "agent-reader-summary.json"
    assert site._agent_reader(path) == []  # not recorded: no section
    alone = {"hit@1": 0.66, "uncovered_declined": 0.36, "in_scope_declined": None}
    read = {"hit@1": 0.785, "uncovered_declined": 0.6, "in_scope_declined": 0.04}
    row = {"split": "test", "questions": "<b>zh</b>", "in_scope": 3, "uncovered": 2, "search": alone, "reader": read}
    path.write_text(json.dumps({"rows": [row]}), encoding="utf-8")
    intro, rendered = site._agent_reader(path)
    assert "as an agent uses it" in intro
    assert "search, then the agent reads its hits" in rendered and "0.785" in rendered and "0.660" in rendered
    assert "—" in rendered and "<b>" not in rendered, "text from the file is data, never markup"
    path.write_text(json.dumps({"rows": [{"split": "dev"}]}), encoding="utf-8")
    (warning,) = site._agent_reader(path)
    assert warning.startswith("!!! warning") and "unreadable" in warning


def test_the_evaluation_page_shows_the_label_agreement_study_when_recorded(tmp_path: Path) -> None:
    path = tmp_path / "label-agreement-summary.json"
    assert site._label_agreement(path) == []  # not recorded: no section
    rows = [{"split": "dev", "questions": "<i>all</i>", "n": 239, "exact": 0.795, "lenient": None}]
    path.write_text(json.dumps({"kappa": {"dev": 0.769, "<b>test</b>": 0.7}, "rows": rows}), encoding="utf-8")
    intro, rendered = site._label_agreement(path)
    assert "two labellers" in intro and "dev 0.769" in intro and "0.700" in intro and "<b>" not in intro
    assert "0.795" in rendered and "239" in rendered and "—" in rendered
    assert "<i>" not in rendered, "text from the file is data, never markup"
    path.write_text(json.dumps({"kappa": {"dev": 0.7}, "rows": [{"questions": "all"}]}), encoding="utf-8")
    (warning,) = site._label_agreement(path)
    assert warning.startswith("!!! warning") and "unreadable" in warning


def test_the_evaluation_page_shows_the_third_labels_when_recorded(tmp_path: Path) -> None:
    path = tmp_path / "label-agreement-summary.json"
    rows = [{"split": "dev", "questions": "all", "n": 239, "exact": 0.795, "lenient": 0.925}]
    sides = [{"split": "dev", "disputed": 49, "with the set": 21, "with the second": 17, "neither": 11}]
    sides[0]["thread not found"] = 0
    routers = [{"split": "<b>dev</b>", "router": "search alone", "reference": "majority of three", "questions": 228}]
    routers[0] |= {"hit@1": 0.713, "uncovered_declined": None, "in_scope_declined": 0.05, "right_outcomes": 0.66}
    summary = {"kappa": {"dev": 0.769}, "rows": rows, "adjudication": {"sides": sides, "routers": routers}}
    path.write_text(json.dumps(summary), encoding="utf-8")
    _intro, _agreement, intro, rendered_sides, rendered_routers = site._label_agreement(path)
    assert "third labeller" in intro and "not changed" in intro
    assert "49" in rendered_sides and "17" in rendered_sides and "third sides neither" in rendered_sides
    assert "0.713" in rendered_routers and "228" in rendered_routers and "—" in rendered_routers
    assert "<b>" not in rendered_routers, "text from the file is data, never markup"
    del summary["adjudication"]["sides"][0]["neither"]
    path.write_text(json.dumps(summary), encoding="utf-8")
    (warning,) = site._label_agreement(path)
    assert warning.startswith("!!! warning") and "unreadable" in warning
