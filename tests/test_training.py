"""The synthetic training questions of the query classifier: they load clean, cover every entry and the
"no entry" class, never near-copy an eval case (a case must not vouch for itself), and reach the fit with
their row weight."""

from __future__ import annotations

import difflib
import json
from collections import Counter

from skillkb import evaluation as ev
from skillkb.api import load_or_fail
from skillkb.classifier import NO_ENTRY, Example, QueryClassifier
from skillkb.loader import EVAL_SETS, TRAINING_FILE, load_training
from skillkb.tokenize import tokenize

from conftest import REPO_ROOT

NEAR = 0.75  # the merge rule of evals/retrieval/training/README.md


def test_the_training_file_loads_and_covers_every_entry() -> None:
    questions, problems = load_training(REPO_ROOT)
    assert problems == []
    labels = Counter(q.label for q in questions)
    entries = load_or_fail(REPO_ROOT).entries
    assert set(labels) == set(entries) | {"none"}, "every entry, and the no-entry class, has written questions"
    assert min(labels.values()) >= 20
    langs = Counter(q.lang for q in questions)
    assert langs["zh"] >= 0.4 * len(questions) and langs["en"] >= 0.4 * len(questions)


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


def test_calibration_fits_on_the_training_file() -> None:
    from skillkb.models import EvalCase
    from skillkb.retrieval import SearchEngine

    engine = SearchEngine.open(REPO_ROOT, use_cache=False)
    cases = [EvalCase(id=f"c{i}", query=f"question {i}", expected=[], lang="en", split="dev") for i in range(5)]
    questions, _ = load_training(REPO_ROOT)
    final, _, stats = ev.fit_classifier(engine, load_or_fail(REPO_ROOT), cases, iterations=5)
    assert stats["synthetic_rows"] == len(questions) > 0
    assert TRAINING_FILE.as_posix().endswith("synthetic.jsonl")
    written = {t for q in questions for t in tokenize(q.text)}
    assert written & set(final.vocab), "the written questions' words reach the classifier"
    _, _, none_stats = ev.fit_classifier(engine, load_or_fail(REPO_ROOT), cases, synthetic=[], iterations=5)
    assert none_stats["synthetic_rows"] == 0 and none_stats["rows"] == stats["rows"] - len(questions)
