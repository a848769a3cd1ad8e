"""Evaluation: metrics agree with ir-measures, significance, exports, calibration and the CI gate."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import ir_measures
import pytest
from ir_measures import MRR, P, R, Success, nDCG

from skillkb import evaluation as ev
from skillkb.api import load_cases_or_fail
from skillkb.cli import main
from skillkb.loader import REAL_CASES_FILE
from skillkb.models import EvalCase
from skillkb.retrieval import DEFAULT_RETRIEVER, SearchEngine

from conftest import REPO_ROOT

CASES = Path("evals/retrieval/cases.jsonl")


@pytest.fixture(scope="module")
def engine() -> SearchEngine:
    return SearchEngine.open(REPO_ROOT, use_cache=False)


@pytest.fixture(scope="module")
def cases() -> list[EvalCase]:
    return load_cases_or_fail(REPO_ROOT, CASES)


@pytest.fixture(scope="module")
def bm25_run(engine: SearchEngine, cases: list[EvalCase]) -> ev.EvalRun:
    return ev.run_eval(engine, cases, "bm25")


def test_metrics_match_ir_measures(bm25_run: ev.EvalRun) -> None:
    in_scope = [o for o in bm25_run.outcomes if o.in_scope and not o.abstained]
    qrels = [ir_measures.Qrel(o.id, doc, grade) for o in in_scope for doc, grade in ev.relevance(o).items()]
    run = [
        ir_measures.ScoredDoc(o.id, doc, float(len(o.ranked) - rank))
        for o in in_scope
        for rank, doc in enumerate(o.ranked)
    ]
    theirs = ir_measures.calc_aggregate(
        [nDCG @ 10, MRR(rel=2) @ 10, Success(rel=2) @ 1, Success(rel=2) @ 3, R(rel=2) @ 5], qrels, run
    )
    ours = ev.aggregate_metrics(in_scope)
    assert ours["ndcg@10"] == pytest.approx(theirs[nDCG @ 10], abs=1e-4)
    assert ours["mrr@10"] == pytest.approx(theirs[MRR(rel=2) @ 10], abs=1e-4)
    assert ours["hit@1"] == pytest.approx(theirs[Success(rel=2) @ 1], abs=1e-4)
    assert ours["hit@3"] == pytest.approx(theirs[Success(rel=2) @ 3], abs=1e-4)
    assert ours["recall@5"] == pytest.approx(theirs[R(rel=2) @ 5], abs=1e-4)
    assert P  # imported for completeness of the measure set


def outcome(case_id: str, ranked: list[str], expected: list[str], negatives=(), abstained=False) -> ev.CaseOutcome:
    first = next((i + 1 for i, d in enumerate(ranked) if d in expected), None)
    return ev.CaseOutcome(
        case_id,
        "q",
        "en",
        "test",
        expected,
        [],
        list(negatives),
        ranked,
        [1.0] * len(ranked),
        abstained,
        None if abstained else first,
        1.0,
    )


def test_metric_definitions_on_a_toy_run() -> None:
    outs = [
        outcome("a", ["x", "y"], ["x"]),
        outcome("b", ["n", "x"], ["x"], negatives=["n"]),
        outcome("c", [], [], abstained=True),
        outcome("d", ["x"], [], abstained=False),
        outcome("e", [], ["x"], abstained=True),
    ]
    m = ev.aggregate_metrics(outs)
    assert m["hit@1"] == pytest.approx(1 / 3)
    assert m["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["negative_intrusion"] == 1.0
    assert m["oos_abstention"] == 0.5
    assert m["false_abstention"] == pytest.approx(1 / 3)


def test_paired_randomization() -> None:
    same = [0.5, 1.0, 0.0, 1.0]
    assert ev.paired_randomization(same, same) == 1.0
    better = [1.0] * 30
    worse = [0.0] * 30
    assert ev.paired_randomization(better, worse) < 0.001
    with pytest.raises(ValueError):
        ev.paired_randomization([1.0], [])


def test_exports(tmp_path: Path, engine: SearchEngine, cases: list[EvalCase], bm25_run: ev.EvalRun) -> None:
    ev.write_report(bm25_run, tmp_path)
    ev.export_beir(engine, cases, tmp_path / "beir")
    trec = (tmp_path / "run-bm25.trec").read_text().splitlines()
    _qid, q0, doc, rank, score, tag = trec[0].split()
    assert q0 == "Q0" and rank == "1" and tag == "skillkb-bm25" and float(score) and doc.count("/") >= 2
    header, *rows = (tmp_path / "beir" / "qrels" / "test.tsv").read_text().splitlines()
    assert header == "query-id\tcorpus-id\tscore" and rows
    corpus = [json.loads(line) for line in (tmp_path / "beir" / "corpus.jsonl").read_text().splitlines()]
    assert {"_id", "title", "text"} == set(corpus[0])
    queries = [json.loads(line) for line in (tmp_path / "beir" / "queries.jsonl").read_text().splitlines()]
    assert len(queries) == len(cases)


def test_calibration_uses_only_dev_cases(engine: SearchEngine, cases: list[EvalCase]) -> None:
    _model, stats = ev.calibrate(engine, cases, "bm25")
    assert stats["dev_in_scope"] == sum(1 for c in cases if c.split == "dev" and c.expected)
    assert stats["dev_false_abstention"] <= ev.DEV_FALSE_ABSTENTION + 1e-9
    test_only = [c for c in cases if c.split == "test"]
    from skillkb.diagnostics import UsageError

    with pytest.raises(UsageError, match="dev cases"):
        ev.calibrate(engine, test_only, "bm25")  # no dev cases: nothing to fit on


@pytest.mark.parametrize(
    ("cases_file", "baseline_file"),
    [(CASES, ev.BASELINE_FILE), (REAL_CASES_FILE, ev.REAL_BASELINE_FILE)],
    ids=["authored", "real"],
)
def test_gate_passes_on_the_committed_baseline(cases_file: Path, baseline_file: Path) -> None:
    baseline = json.loads((REPO_ROOT / baseline_file).read_text())
    engine = SearchEngine.open(REPO_ROOT, use_cache=False)
    run = ev.run_eval(engine, load_cases_or_fail(REPO_ROOT, cases_file), baseline["retriever"])
    assert ev.gate(run, baseline) == []
    assert baseline["retriever"] == DEFAULT_RETRIEVER  # CI gates what users get


def test_gate_fails_on_a_degraded_index(cases: list[EvalCase]) -> None:
    baseline = json.loads((REPO_ROOT / ev.BASELINE_FILE).read_text())
    engine = SearchEngine.open(REPO_ROOT, use_cache=False)
    # Degrade: drop the flagship entry from the index, as a broken loader or a bad merge would.
    acl = "hardware/ascend/ascend-aclgraph-capture-replay"
    keep = [i for i, d in enumerate(engine.docs) if d.entry_id != acl]
    from skillkb.retrieval import BM25Index, PhraseIndex
    from skillkb.signals import SignatureIndex
    from skillkb.tokenize import tokenize

    docs = [engine.docs[i] for i in keep]
    phrases = [(e, t) for e, t in zip(engine.phrases.owners, engine.phrases.texts, strict=True) if e != acl]
    signatures = SignatureIndex(
        {k: [e for e in v if e != acl] for k, v in engine.signatures.fragments.items()},
        {k: [e for e in v if e != acl] for k, v in engine.signatures.codes.items()},
    )
    degraded = replace(
        engine,
        docs=docs,
        bm25=BM25Index.build([tokenize(d.index_text) for d in docs]),
        phrases=PhraseIndex.build(phrases),
        signatures=signatures,
        _rankers={},
    )
    problems = ev.gate(ev.run_eval(degraded, cases, baseline["retriever"]), baseline)
    assert any(p.startswith("case aclgraph-") for p in problems)
    assert any(p.startswith("metric ") for p in problems)


def test_cli_gate_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = json.loads((REPO_ROOT / ev.BASELINE_FILE).read_text())
    baseline["metrics"]["hit@1"] = 1.5  # unreachable: the gate must fail and say why
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline))
    code = main(["--root", str(REPO_ROOT), "eval", "--retriever", baseline["retriever"], "--gate", str(path)])
    assert code == 1
    assert "metric hit@1 fell" in capsys.readouterr().err


def test_bad_cases_file_names_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": "ok-1", "query": "x", "expected": [], "lang": "en"}\n{"id": "bad", "query": 3}\n')
    assert main(["--root", str(REPO_ROOT), "eval", "--cases", str(path), "--retriever", "bm25"]) == 1
    err = capsys.readouterr().err
    assert ":2:" in err and "query" in err


def test_reports_break_the_test_split_down_by_tag(engine: SearchEngine) -> None:
    real = load_cases_or_fail(REPO_ROOT, REAL_CASES_FILE)
    picked = [c for c in real if "round3" in c.tags][:12] + [c for c in real if "round3" not in c.tags][:12]
    report = ev.run_eval(engine, picked, DEFAULT_RETRIEVER).report()
    fresh_test = [c for c in picked if c.split == "test" and "round3" in c.tags]
    assert report["test_by_tag"]["round3"]["cases"] == len(fresh_test) > 0
    assert all(tag in {t for c in picked if c.split == "test" for t in c.tags} for tag in report["test_by_tag"])
