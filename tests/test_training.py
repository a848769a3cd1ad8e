"""The query classifier's training questions (written from the entries, and real titles labelled by judges
from the title or by the root cause their thread shows): they load clean, cover every entry and the "no
entry" class, never near-copy an eval case nor come from an eval thread (a case must not vouch for itself),
and reach the fit with their row weight."""

from __future__ import annotations

import difflib
import json
from collections import Counter

from skillkb import evaluation as ev
from skillkb.api import load_or_fail
from skillkb.classifier import NO_ENTRY, Example, QueryClassifier
from skillkb.loader import EVAL_SETS, load_training
from skillkb.models import thread_key
from skillkb.tokenize import tokenize

from conftest import REPO_ROOT, reserved_threads

NEAR = 0.75  # the merge rule of evals/retrieval/training/README.md


def test_the_training_files_load_and_cover_every_entry() -> None:
    questions, problems = load_training(REPO_ROOT)
    assert problems == []
    labels = Counter(q.label for q in questions if q.origin == "written")
    entries = load_or_fail(REPO_ROOT).entries
    assert set(labels) == set(entries) | {"none"}, "every entry, and the no-entry class, has written questions"
    assert min(labels.values()) >= 20
    written = [q for q in questions if q.origin == "written"]  # real titles keep the language they were asked in
    langs = Counter(q.lang for q in written)
    assert langs["zh"] >= 0.4 * len(written) and langs["en"] >= 0.4 * len(written)


def _near(a: str, b: str) -> bool:
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return m.real_quick_ratio() >= NEAR and m.quick_ratio() >= NEAR and m.ratio() >= NEAR


def test_no_training_question_near_copies_an_eval_case() -> None:
    queries = [
        json.loads(line)["query"].lower()
        for path in EVAL_SETS.values()
        for line in (REPO_ROOT / path).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    questions, _ = load_training(REPO_ROOT)
    close = [(q.text, c) for q in questions for c in queries if _near(q.text.lower(), c)]
    assert close == [], f"{len(close)} training questions within {NEAR} of an eval case, e.g. {close[:2]}"


def test_the_near_copy_rule_can_fail() -> None:
    pasted = "npu out of memory. tried to allocate 2.00 gib"
    assert _near("runtimeerror: " + pasted, pasted)
    assert not _near("npu out of memory", "how do i enable sleep mode")


def _row(text: str, label: str, weight: float = 1.0) -> Example:
    tokens = tokenize(text)
    return Example(tokens, [1.0] * len(tokens), label, weight)


def test_a_row_weight_moves_the_fit() -> None:
    """Two rows disagree about one word; the heavier one wins, and the fit tolerates a row with no tokens."""
    a, b = "hardware/ascend/ascend-sleep-mode", "repositories/vllm/worker-rpc"
    base = [_row("sleep wake", a), _row("rpc timeout", b), _row("", NO_ENTRY)]

    def winner(weight_a: float, weight_b: float) -> str:
        model = QueryClassifier.fit([*base, _row("zyzzyva", a, weight_a), _row("zyzzyva", b, weight_b)])
        tokens = tokenize("zyzzyva")
        p = model.probabilities(tokens, [1.0] * len(tokens))
        return max(p, key=p.__getitem__)

    assert winner(3.0, 1.0) == a
    assert winner(1.0, 3.0) == b


def test_no_real_title_comes_from_an_eval_thread() -> None:
    real = [json.loads(line) for line in (REPO_ROOT / EVAL_SETS["real"]).read_text(encoding="utf-8").splitlines()]
    eval_threads = {thread_key(c["source"]) for c in real}
    questions, _ = load_training(REPO_ROOT)
    titles = [q for q in questions if q.origin != "written"]
    assert {q.origin for q in titles} == {"judged", "thread"}, "both kinds of real title are training data"
    assert [q.source for q in titles if thread_key(q.source or "") in eval_threads] == []


def test_thread_labels_come_from_judged_threads_and_say_why() -> None:
    """The thread-labelled titles are the judged titles' threads read whole: same text, a rationale each."""
    questions, _ = load_training(REPO_ROOT)
    judged = {q.source: q.text for q in questions if q.origin == "judged"}
    threads = [q for q in questions if q.origin == "thread"]
    assert threads and all(q.rationale for q in threads)
    assert [q.source for q in threads if judged.get(q.source) != q.text] == []


def test_no_real_title_comes_from_a_reserved_thread() -> None:
    reserved = reserved_threads()
    questions, _ = load_training(REPO_ROOT)
    assert [q.source for q in questions if q.source and thread_key(q.source) in reserved] == []


def test_calibration_fits_on_the_training_files() -> None:
    from skillkb.models import EvalCase
    from skillkb.retrieval import SearchEngine

    engine = SearchEngine.open(REPO_ROOT, use_cache=False)
    cases = [EvalCase(id=f"c{i}", query=f"question {i}", expected=[], lang="en", split="dev") for i in range(5)]
    questions, _ = load_training(REPO_ROOT)
    shipped = [q for q in questions if ev.TRAINING_WEIGHTS[q.origin] > 0]
    final, _, stats = ev.fit_classifier(engine, load_or_fail(REPO_ROOT), cases, iterations=5)
    assert stats["training_rows"] == len(shipped) > 0
    words = {t for q in shipped for t in tokenize(q.text)}
    assert words & set(final.vocab), "the training questions' words reach the classifier"
    _, _, bare = ev.fit_classifier(engine, load_or_fail(REPO_ROOT), cases, [], iterations=5)
    assert bare["training_rows"] == 0 and bare["rows"] == stats["rows"] - len(shipped)
    for weights in (
        {"written": 1.0, "judged": 0.0, "thread": 0.0},
        {"written": 0.0, "judged": 0.5, "thread": 0.0},
        {"written": 0.0, "judged": 0.0, "thread": 0.25},
    ):
        rows = ev.training_rows(REPO_ROOT, weights)
        assert len(rows) == sum(weights[q.origin] > 0 for q in questions)
        assert {w for _, _, w in rows} == {w for w in weights.values() if w > 0}
