"""Generated coverage pages: deterministic, drift-checked, and carrying the numbers the library API gives."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_drift import FEATURE, TO_COMMIT, make_drift_library

from skillkb.api import load_or_fail
from skillkb.cli import main
from skillkb.coverage import (
    COVERAGE_PAGE,
    GENERATED,
    MATRIX_PAGE,
    OWNERSHIP_PAGE,
    build_pages,
    stale_pages,
    write_pages,
)
from skillkb.drift import DEFAULT_FROM, DEFAULT_TO, DRIFT_PAGE
from skillkb.manifests import MANIFEST_DIR
from skillkb.validate import entry_stats, missing_gates

from conftest import DEMO_COMMIT, REPO_ROOT

MECHANISM = "repositories/vllm/demo-mechanism"
CONSTRAINT = "hardware/ascend/demo-constraint"
PAGES = (MATRIX_PAGE, COVERAGE_PAGE, OWNERSHIP_PAGE)
PARTIAL_COMMIT = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"


def run(root: Path, *args: str) -> int:
    return main(["--root", str(root), *args])


def page(root: Path, path: Path) -> str:
    return (root / path).read_text(encoding="utf-8")


def test_two_runs_are_byte_identical(library_root: Path, capsys) -> None:
    assert run(library_root, "coverage") == 0
    first = {p: (library_root / p).read_bytes() for p in PAGES}
    assert capsys.readouterr().out.count(" written") == len(PAGES)
    assert run(library_root, "coverage") == 0
    assert capsys.readouterr().out.split() == [w for p in sorted(PAGES) for w in (p.as_posix(), "unchanged")]
    assert {p: (library_root / p).read_bytes() for p in PAGES} == first
    assert write_pages(load_or_fail(library_root)) == dict.fromkeys(PAGES, False)
    assert not list((library_root / "docs").glob(".*.tmp"))
    # The library has no default vllm-ascend pair: no drift page, and the coverage page says so.
    assert not (library_root / DRIFT_PAGE).exists()
    assert "Upstream drift was not computed" in page(library_root, COVERAGE_PAGE)


def test_every_page_says_it_is_generated(library_root: Path) -> None:
    for path, data in build_pages(load_or_fail(library_root)).items():
        first = data.decode().split("\n", 1)[0]
        assert first == GENERATED and "`skillkb coverage`" in first and "do not edit" in first, path
        assert data.endswith(b"\n") and not data.endswith(b"\n\n"), path


def test_check_detects_a_hand_edit(library_root: Path, capsys) -> None:
    assert run(library_root, "coverage") == 0
    assert run(library_root, "coverage", "--check") == 0
    capsys.readouterr()
    target = library_root / OWNERSHIP_PAGE
    target.write_text(target.read_text() + "hand edit\n")
    assert run(library_root, "coverage", "--check") == 1
    err = capsys.readouterr().err
    assert "docs/ownership.md" in err and "docs/skill-coverage.md" not in err
    (library_root / MATRIX_PAGE).unlink()
    assert set(stale_pages(load_or_fail(library_root))) == {MATRIX_PAGE, OWNERSHIP_PAGE}


def test_check_detects_a_library_change(library_root: Path, capsys) -> None:
    assert run(library_root, "coverage") == 0
    cases = library_root / "evals/retrieval/cases.jsonl"
    cases.write_text(
        cases.read_text()
        + '{"id": "demo-002", "query": "allocator runs out", "expected": ["hardware/ascend/demo-constraint"], '
        + '"lang": "en"}\n'
    )
    assert run(library_root, "coverage", "--check") == 1
    assert "docs/skill-coverage.md is stale" in capsys.readouterr().err
    meta = library_root / CONSTRAINT / "entry.yaml"
    meta.write_text(meta.read_text().replace("state: candidate", "state: deferred\n  reason: waiting"))
    assert set(stale_pages(load_or_fail(library_root))) == {COVERAGE_PAGE, OWNERSHIP_PAGE, MATRIX_PAGE}
    assert run(library_root, "coverage") == 0
    assert run(library_root, "coverage", "--check") == 0


def test_broken_library_is_refused(library_root: Path) -> None:
    (library_root / FEATURE / "entry.yaml").write_text("tier: [\n")
    assert run(library_root, "coverage") == 1
    assert not (library_root / "docs").exists()


def test_matrix_rows_by_tier(library_root: Path) -> None:
    text = build_pages(load_or_fail(library_root))[MATRIX_PAGE].decode()
    order = [text.index(f"| `{entry_id}` |") for entry_id in (MECHANISM, FEATURE, CONSTRAINT)]
    headings = [text.index(f"## Tier {tier} ") for tier in (1, 2, 3)]
    assert headings[0] < order[0] < headings[1] < order[1] < headings[2] < order[2]
    row = next(line for line in text.split("\n") if line.startswith(f"| `{FEATURE}` |"))
    assert f"`acme/widget@{DEMO_COMMIT[:12]}` (v1.0.0), 1 file(s)" in row
    assert "`vllm_ascend v0.25.1rc1`" in row and "| candidate |" in row and "`hardware/ascend`" in row


def test_coverage_numbers_come_from_the_library(library_root: Path) -> None:
    library = load_or_fail(library_root)
    text = build_pages(library)[COVERAGE_PAGE].decode()
    for entry in library.sorted_entries():
        stats = entry_stats(entry, library)
        row = next(line for line in text.split("\n") if line.startswith(f"| `{entry.id}` |"))
        assert f"| {stats.cited_facts} | {stats.triage_rows} | {stats.eval_cases} |" in row
        for gap in missing_gates(entry, library, "covered"):  # candidates: what they miss to be covered
            assert gap in row
        assert f"- Still missing for `covered`: {'; '.join(missing_gates(entry, library, 'covered'))}" in text


def test_partial_evidence_is_explained(library_root: Path) -> None:
    manifests = library_root / MANIFEST_DIR
    (manifests / f"acme__widget@{PARTIAL_COMMIT}.partial.tsv").write_text(
        "path\tblob\tbytes\tlines\nsrc/pool.py\t2222222222222222222222222222222222222222\t900\t30\n"
    )
    meta = library_root / MECHANISM / "entry.yaml"
    meta.write_text(
        meta.read_text()
        .replace(DEMO_COMMIT, PARTIAL_COMMIT)
        .replace("state: candidate", "state: to-refine\n  reason: partial")
    )
    skill = library_root / MECHANISM / "SKILL.md"
    skill.write_text(skill.read_text().replace("widget@0123456", f"widget@{PARTIAL_COMMIT[:7]}"))
    text = build_pages(load_or_fail(library_root))[COVERAGE_PAGE].decode()
    row = next(line for line in text.split("\n") if line.startswith(f"| `{MECHANISM}` |"))
    assert "| 0 / 0 / 1 / 0 |" in row and "partial-manifest" in row
    section = text.split(f"### `{MECHANISM}`")[1].split("### ")[0]
    assert "Tier 1 entries read upstream vLLM as single stored files" in section
    assert f"acme__widget@{PARTIAL_COMMIT}.partial.tsv" in section
    other = text.split(f"### `{FEATURE}`")[1].split("### ")[0]
    assert "Evidence blocking" not in other


def test_ownership_has_reverse_edges(library_root: Path) -> None:
    meta = library_root / FEATURE / "entry.yaml"
    meta.write_text(
        meta.read_text().replace(
            "cross_refs: []",
            f"cross_refs:\n  - {{id: {CONSTRAINT}, relation: builds-on}}\n  - {{id: {MECHANISM}, relation: not-this}}",
        )
    )
    text = build_pages(load_or_fail(library_root))[OWNERSHIP_PAGE].decode()
    rows = {line.split(" | ")[1]: line for line in text.split("\n") if line.startswith("| ") and "`/" not in line}
    assert rows[f"`{FEATURE}`"].split(" | ")[4] == f"`{CONSTRAINT}`"  # builds on
    assert rows[f"`{FEATURE}`"].split(" | ")[6] == f"`{MECHANISM}`"  # not this
    assert rows[f"`{CONSTRAINT}`"].rstrip(" |").endswith(f"`{FEATURE}`")  # built on by
    assert rows[f"`{MECHANISM}`"].rstrip(" |").endswith("–")


def test_coverage_flags_drifted_entries(library_root: Path) -> None:
    old, new = make_drift_library(library_root)
    library = load_or_fail(library_root)
    pages = build_pages(library, (old, new))
    assert DRIFT_PAGE in pages
    text = pages[COVERAGE_PAGE].decode()
    row = next(line for line in text.split("\n") if line.startswith(f"| `{FEATURE}` |"))
    assert "**drifted**: 1 changed, 1 moved, 1 moved?, 1 vanished; 5 citation(s); 3 not re-read at target" in row
    unchanged = next(line for line in text.split("\n") if line.startswith(f"| `{MECHANISM}` |"))
    assert unchanged.endswith("| none |")
    target_only = next(line for line in text.split("\n") if line.startswith(f"| `{CONSTRAINT}` |"))
    assert f"no readset at `{DEMO_COMMIT[:12]}`" in target_only
    assert TO_COMMIT[:12] in pages[DRIFT_PAGE].decode()


def test_default_pair_writes_the_drift_page(library_root: Path) -> None:
    for name in (DEFAULT_FROM, DEFAULT_TO):
        shutil.copy(REPO_ROOT / MANIFEST_DIR / name, library_root / MANIFEST_DIR / name)
    assert run(library_root, "coverage") == 0
    text = page(library_root, DRIFT_PAGE)
    assert text.startswith("<!-- Generated by `skillkb coverage`")
    assert "vllm-project/vllm-ascend 9bf964cb4b87 → 182b75ea84ff" in text  # no fixture entry reads it
    assert run(library_root, "coverage", "--check") == 0
    (library_root / DRIFT_PAGE).write_text(text.replace("Summary", "Summery"))
    assert run(library_root, "coverage", "--check") == 1


def test_committed_pages_are_current(capsys) -> None:
    code = run(REPO_ROOT, "coverage", "--check")
    assert code == 0, capsys.readouterr().err + "\nrun `skillkb coverage` and commit the result"
