"""One set of signal weights for every question, or one per language? Nested cross-validation on dev.

    .venv/bin/python bench/bench_language_weights.py

The combined ranker's weights are fitted on dev by coordinate ascent (``evaluation.fit_combined``); the
shipped search fits one set for questions with Chinese in them and one for the rest
(``tokenize.query_language``). Fitting and scoring on the same dev questions flatters whichever variant has
more weights, so this measures both variants out of sample: dev is cut into the classifier's five folds,
each fold's questions are ranked with weights fitted on the other four (their learned signal from the
classifier that never saw them, as in calibration), and the two variants are compared question by
question (paired randomisation). ``bench/RESULTS.md`` (round 6) has the figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.loader import EVAL_SETS  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import clean_query, engine_for  # noqa: E402
from skillkb.tokenize import query_language  # noqa: E402


def main() -> None:
    engine = engine_for(ROOT)
    dev = [c for path in EVAL_SETS.values() for c in load_cases_or_fail(ROOT, path) if c.split == "dev"]
    dev = sorted(dev, key=ev.case_key)
    _, held_out, _ = ev.fit_classifier(engine, load_or_fail(ROOT), dev)
    ranker = engine.ranker("combined")
    signals = {}  # by question text (no two dev questions share one): fit_combined asks the ranker by text
    for case in dev:  # each question's signals once, its learned one out of fold
        with ev.held_out_classifier(engine, held_out, case):
            signals[case.query] = ranker.signals(clean_query(case.query))  # type: ignore[attr-defined]
    ranker.signals = signals.__getitem__  # type: ignore[attr-defined]

    def first_right(case: EvalCase, weights: dict[str, float]) -> float:
        scored = [(ranker.score(s, weights), s.entry_id) for s in signals[case.query]]  # type: ignore[attr-defined]
        return float(ev._first_rank(scored, set(case.expected)) == 1)

    fold = {ev.case_key(c): i % ev.CLASSIFIER_FOLDS for i, c in enumerate(dev)}
    outcomes: dict[str, list[tuple[EvalCase, float]]] = {"one set": [], "one per language": []}
    for k in range(ev.CLASSIFIER_FOLDS):
        train = [c for c in dev if fold[ev.case_key(c)] != k]
        one, _ = ev.fit_combined(engine, train)
        per = {lang: ev.fit_combined(engine, train, language=lang)[0] for lang in ("en", "zh")}
        print(f"fold {k}: one set {one}; zh {per['zh']}; en {per['en']}", flush=True)
        for case in (c for c in dev if fold[ev.case_key(c)] == k and c.expected):
            outcomes["one set"].append((case, first_right(case, one)))
            outcomes["one per language"].append((case, first_right(case, per[query_language(case.query)])))
    print("\n| case set | questions | in scope | one set Hit@1 | one per language Hit@1 | p |")
    print("|---|---|---:|---:|---:|---:|")
    pairs = list(zip(outcomes["one set"], outcomes["one per language"], strict=True))
    for origin in EVAL_SETS:
        for lang in ("all", "zh", "en"):
            rows = [
                (a, b)
                for (case, a), (_, b) in pairs
                if case.origin == origin and lang in ("all", query_language(case.query))
            ]
            a, b = [r[0] for r in rows], [r[1] for r in rows]
            p = ev.paired_randomization(b, a)
            print(f"| {origin} | {lang} | {len(rows)} | {sum(a) / len(a):.3f} | {sum(b) / len(b):.3f} | {p:.4f} |")


if __name__ == "__main__":
    main()
