"""The combined ranker's learned signal (``classifier.py``) and the numpy-free query path: the classifier
learns words no entry uses, survives its own file format exactly, is refused when malformed, is fitted
out of fold for calibration, and a warm search process imports neither numpy nor anything heavier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillkb import evaluation as ev
from skillkb.classifier import NO_ENTRY, Example, QueryClassifier
from skillkb.models import EvalCase
from skillkb.retrieval import CALIBRATION_FILE, BM25Index, Calibration, SearchEngine
from skillkb.tokenize import tokenize

from conftest import REPO_ROOT

A, B = "hardware/ascend/ascend-sleep-mode", "repositories/vllm/paged-attention-block-manager"


@pytest.fixture(scope="module")
def engine() -> SearchEngine:
    return SearchEngine.open(REPO_ROOT, use_cache=False)  # built: numpy arrays, the other query path


def rows(text: str, label: str) -> Example:
    tokens = tokenize(text)
    return Example(tokens, [1.0] * len(tokens), label)


def toy() -> QueryClassifier:
    training = [rows("wake up after sleep", A), rows("sleep level two", A), rows("kv blocks too few", B)]
    training += [rows("kv cache budget", B), rows("tool parser", NO_ENTRY)]
    return QueryClassifier.fit(training)


def query(text: str) -> tuple[list[str], list[float]]:
    tokens = tokenize(text)
    return tokens, [1.0] * len(tokens)


def test_the_classifier_learns_which_words_mean_which_entry() -> None:
    model = toy()
    p = model.probabilities(*query("sleep then wake"))
    assert max(p, key=p.get) == A and abs(sum(p.values()) - 1.0) < 1e-9
    q = model.probabilities(*query("kv budget"))
    assert max(q, key=q.get) == B
    unknown = model.probabilities(["never-seen"], [1.0])
    assert max(unknown.values()) < 0.6  # no evidence: close to the class prior
    assert model.pushes(*query("sleep budget"), A)[0][0] == "sleep"


def test_a_fitted_classifier_scores_exactly_as_the_saved_one() -> None:
    model = toy()
    again = QueryClassifier.from_json(json.loads(json.dumps(model.to_json())))
    asked = query("wake kv sleep budget tool")
    assert again.probabilities(*asked) == model.probabilities(*asked)


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(weights_f16=d["weights_f16"][:-8]),  # truncated
        lambda d: d.update(bias=d["bias"][:-1]),  # a class without a bias
        lambda d: d.update(weights_f16="not base64!"),
        lambda d: d.update(weights_f16="AHw=" * (len(d["vocab"]) * len(d["classes"]) // 2)),  # inf
        lambda d: d.pop("vocab"),
    ],
)
def test_a_malformed_classifier_is_a_calibration_diagnostic(tmp_path: Path, damage) -> None:
    data = json.loads((REPO_ROOT / CALIBRATION_FILE).read_text())
    damage(data["classifier"])
    (tmp_path / CALIBRATION_FILE).parent.mkdir(parents=True)
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps(data))
    calibration, problems = Calibration.load(tmp_path)
    assert calibration.classifier is None and problems and problems[0].code == "calibration-invalid"


def test_the_committed_calibration_carries_a_classifier_the_ranker_uses() -> None:
    calibration, problems = Calibration.load(REPO_ROOT)
    assert not problems and calibration.classifier is not None
    assert calibration.rankers["combined"]["learned"] > 0
    assert {A, B, NO_ENTRY} <= set(calibration.classifier.classes)


@pytest.mark.parametrize(
    ("text", "language"),
    [("显存占用很高", "zh"), ("Qwen3 部署后 KV cache 不够", "zh"), ("KV cache blocks too few", "en"), ("207008", "en")],
)
def test_a_question_with_chinese_in_it_is_a_chinese_question(text: str, language: str) -> None:
    from skillkb.tokenize import query_language

    assert query_language(text) == language


def test_a_chinese_question_is_ranked_and_explained_with_the_chinese_weights(engine: SearchEngine) -> None:
    from skillkb.retrieval import WEIGHT_KEYS

    ranker = engine.ranker("combined")
    saved = ranker.weights, ranker.chinese_weights  # type: ignore[attr-defined]
    section_only = {"section": 1.0, "card": 0.0, "coverage": 0.0, "signature": 0.0, "phrase": 0.0, "learned": 0.0}
    try:
        ranker.weights, ranker.chinese_weights = dict(section_only), None  # type: ignore[attr-defined]
        zh, en = "锁页内存 释放 pinned memory", "pinned memory release"
        plain = {q: ranker.rank(q).order for q in (zh, en)}
        ranker.chinese_weights = {**section_only, "section": 0.0, "card": 1.0}  # type: ignore[attr-defined]
        assert ranker.rank(en).order == plain[en]  # an English question keeps the first set
        assert ranker.rank(zh).order != plain[zh]  # a Chinese one is ranked by its cards now
        card = ranker.signals(zh)  # type: ignore[attr-defined]
        assert [round(s, 6) for _, s in ranker.rank(zh).order] == sorted(
            (round(x.values["card"], 6) for x in card if x.values["card"] > 0), reverse=True
        )
        explained = engine.search(zh, explain=True).explanation
        assert explained["weights_for_language"] == "zh"
        assert all(row["signals"]["section"]["weight"] == 0.0 for row in explained["hits"])
    finally:
        ranker.weights, ranker.chinese_weights = saved  # type: ignore[attr-defined]
    calibration, _ = Calibration.load(REPO_ROOT)
    assert set(WEIGHT_KEYS.values()) <= set(calibration.rankers)  # the committed calibration has both sets


def test_the_abstention_features_carry_the_classifiers_no_entry_probability(engine: SearchEngine) -> None:
    from skillkb.abstain import FEATURES
    from skillkb.retrieval import clean_query
    from skillkb.signals import weighted_query

    column = FEATURES.index("no_entry")
    text = "tool parser for function calling on vllm-ascend"
    wq = weighted_query(clean_query(text), engine.lexicon)
    ranker = engine.ranker("combined")
    saved = ranker.classifier  # type: ignore[attr-defined]
    try:
        ranker.classifier = toy()  # type: ignore[attr-defined]
        wanted = toy().probabilities(wq.tokens, wq.weights)[NO_ENTRY]
        got = engine.search(text, abstain=False).features[column]
        assert got == pytest.approx(wanted) and got > 0.3  # the toy's "tool parser" row is NO_ENTRY
        ranker.classifier = None  # type: ignore[attr-defined]
        assert engine.search(text, abstain=False).features[column] == 0.0
    finally:
        ranker.classifier = saved  # type: ignore[attr-defined]
    assert engine.search(text, abstain=False, retriever="bm25").features[column] == 0.0


def test_cross_fitting_never_scores_a_case_with_a_model_that_saw_it(engine: SearchEngine) -> None:
    from skillkb.api import load_or_fail

    word = "zyzzyva"  # a word only this case has: a model trained on it would know it
    cases = [
        EvalCase(id=f"c{i}", query=f"{word} {i}" if i == 0 else f"question {i}", expected=[A], lang="en", split="dev")
        for i in range(10)
    ]
    final, held_out, stats = ev.fit_classifier(engine, load_or_fail(REPO_ROOT), cases)
    assert word in final.vocab and stats["folds"] == ev.CLASSIFIER_FOLDS
    assert word not in held_out[ev.case_key(cases[0])].vocab
    assert sum(word in model.vocab for model in held_out.values()) == len(cases) - len(cases) // ev.CLASSIFIER_FOLDS


def test_the_saved_index_scores_exactly_as_the_built_one(tmp_path: Path, engine: SearchEngine) -> None:
    engine.bm25.save(tmp_path / "i.bin")
    loaded = BM25Index.load(tmp_path / "i.bin")
    assert type(loaded.data).__module__ == "array"  # small: queried in plain Python
    for query in ("AclmdlRICaptureBegin 207008", "锁页内存 释放 显存", "kv cache blocks", "nothing-known"):
        tokens = tokenize(query)
        weights = [0.5 + i for i in range(len(tokens))]
        assert list(loaded.scores(tokens, weights)) == list(engine.bm25.scores(tokens, weights))


def _sized_header(sizes: list[int]) -> bytes:
    import struct

    header = json.dumps({"vocab": {"a": 0}, "num_docs": 1, "sizes": sizes}).encode()
    return b"SKBM25\x01" + struct.pack("<Q", len(header)) + header + b"\0" * 4 * sum(sizes) * 2


DAMAGED = [
    b"",
    b"SKBM25\x01garbage",
    b"not an index at all",
    _sized_header([1, 2, 2, 1]),  # more postings than document ids
    _sized_header([1, 1, 5, 1]),  # token pointers that do not match the idf table
    _sized_header([1, 1, 2, 1])[:-3],  # arrays of the wrong length
]


@pytest.mark.parametrize("damage", DAMAGED)
def test_an_unreadable_index_is_refused_and_the_cache_rebuilt(tmp_path: Path, damage: bytes) -> None:
    (tmp_path / "i.bin").write_bytes(damage)
    with pytest.raises(ValueError):
        BM25Index.load(tmp_path / "i.bin")


def test_a_damaged_cache_is_rebuilt_not_served(tmp_path: Path) -> None:
    from conftest import write_library

    root = write_library(tmp_path)
    first = SearchEngine.open(root).search("sleep", k=3).results
    for index in (root / ".cache" / "skillkb").glob("bm25-*.bin"):
        index.write_bytes(index.read_bytes()[:-16])  # truncated by a crash or a full disk
    assert SearchEngine.open(root).search("sleep", k=3).results == first


def test_a_warm_search_process_imports_no_numpy() -> None:
    code = (
        "import sys; from skillkb.cli import main; "
        f"main(['--root', {str(REPO_ROOT)!r}, 'search', '启动后显存占用很高 kv cache', '--json']); "
        "print('HEAVY', [m for m in ('numpy', 'bm25s', 'torch', 'sklearn') if m in sys.modules], file=sys.stderr)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for _ in range(2):  # the first run may build the on-disk cache (that needs bm25s); the second is warm
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stderr


def test_each_weight_set_is_fitted_on_its_own_languages_questions_only(engine: SearchEngine) -> None:
    from skillkb.diagnostics import UsageError

    english = [
        EvalCase(id=f"e{i}", query=f"sleep mode wake up {i}", expected=[A], lang="en", split="dev") for i in range(4)
    ]
    weights, stats = ev.fit_combined(engine, english, language="en")
    assert stats["dev_cases_authored"] == 4 and set(weights) == set(engine.ranker("combined").weights)  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="language: zh"):
        ev.fit_combined(engine, english, language="zh")


def test_a_candidate_signal_is_fitted_beside_the_shipped_ones(
    engine: SearchEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/bench_reader.py hands fit_combined a signal the ranker does not ship: it gets a weight of its
    own, from 0, and only when asked for."""
    ranker = engine.ranker("combined")
    shipped = ranker.signals  # type: ignore[attr-defined]

    def with_oracle(query: str) -> list:
        out = shipped(query)
        for s in out:  # names the expected entry although the words point to sleep mode
            s.values = {**s.values, "oracle": float(s.entry_id == B)}
        return out

    monkeypatch.setattr(ranker, "signals", with_oracle)
    cases = [
        EvalCase(id=f"o{i}", query=f"sleep mode wake up level {i}", expected=[B], lang="en", split="dev")
        for i in range(4)
    ]
    plain, _ = ev.fit_combined(engine, cases, language="en")
    weights, stats = ev.fit_combined(engine, cases, language="en", extra=("oracle",))
    assert "oracle" not in plain
    assert weights["oracle"] > 0
    assert stats["dev_objective_fitted"] == 1.0 > stats["dev_objective_default"]
