"""Nearest labelled questions as a ranking signal (round 9), cross-fitted on the dev splits.

    .venv/bin/python bench/bench_knn.py [--depth 10]

The learned signal is a linear model over a question's words: it weighs every word, and a rare phrase that
one labelled question shares with a new one ("FlashComm1", "swap_space") counts for little. A k-nearest-
neighbour vote reads the same labelled questions the other way: find the labelled questions most like this
one (BM25 over them, the query weighted as the search weighs it) and let their labels vote, each by its
similarity relative to the nearest. The pool is what the classifier trains on: every entry's phrasings, the
written training questions at the shipped row weights, and the dev questions of the other folds (an
uncovered one votes for "no entry"). Signals: ``knn`` (the entry's share of the vote), and for abstention the
share that "no entry" gets, compared with the classifier's p(no entry) by AUC.

Every question is scored out of fold (its pool and its learned signal leave its fold out), and each variant's
signal weights are re-fitted per language on the other folds by the shipped coordinate ascent. p: paired
randomisation against the shipped signals re-fitted the same way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from crossfit import (  # noqa: E402
    cross_fitted_dev,
    cross_fitted_hits,
    fold_of,
    other_folds,
    print_hit1_table,
    print_no_entry_auc_table,
    training_pool,
)

from skillkb import evaluation as ev  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import BM25Index, EntrySignals, SearchEngine, clean_query  # noqa: E402
from skillkb.signals import weighted_query  # noqa: E402

VARIANTS = {"shipped signals": (), "+ knn": ("knn",)}
Row = tuple[str, str, float]  # (label, "" for no entry; text; row weight)


def votes(engine: SearchEngine, pool: list[Row], queries: list[str], depth: int) -> list[dict[str, float]]:
    """Per query: each label's share of the similarity-weighted vote of its ``depth`` nearest pool rows."""
    index = BM25Index.build([weighted_query(clean_query(text), engine.lexicon).tokens for _, text, _ in pool])
    out = []
    for query in queries:
        wq = weighted_query(clean_query(query), engine.lexicon)
        scores = index.scores(wq.tokens, wq.weights)
        ranked = sorted(((float(s), i) for i, s in enumerate(scores) if s > 0), reverse=True)[:depth]
        vote: dict[str, float] = {}
        for score, i in ranked:
            label, _, weight = pool[i]
            vote[label] = vote.get(label, 0.0) + weight * score / ranked[0][0]
        total = sum(vote.values()) or 1.0
        out.append({label: v / total for label, v in vote.items()})
    return out


def out_of_fold_votes(engine: SearchEngine, dev: list[EvalCase], depth: int) -> list[dict[str, float]]:
    base = training_pool()
    fold = list(fold_of(dev).values())
    result: list[dict[str, float]] = [{} for _ in dev]
    for k in range(ev.CLASSIFIER_FOLDS):
        pool = base + [(label, dev[i].query, 1.0) for i, label in other_folds(dev, k)]
        inside = [i for i in range(len(dev)) if fold[i] == k]
        for i, vote in zip(inside, votes(engine, pool, [dev[i].query for i in inside], depth), strict=True):
            result[i] = vote
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depth", type=int, default=10, help="how many nearest labelled questions vote")
    args = parser.parse_args()
    engine, dev, shipped = cross_fitted_dev()
    knn = out_of_fold_votes(engine, dev, args.depth)
    signals = {
        case.query: [
            EntrySignals(s.entry_id, s.best_doc, s.values | {"knn": vote.get(s.entry_id, 0.0)})
            for s in shipped[case.query][0]
        ]
        for case, vote in zip(dev, knn, strict=True)
    }
    hits = {name: cross_fitted_hits(engine, dev, signals, extra) for name, extra in VARIANTS.items()}
    print(f"\nIn-scope dev questions, Hit@1, every question out of fold (depth {args.depth}; p: against shipped)\n")
    print_hit1_table(dev, hits, list(VARIANTS))
    classifier = [shipped[c.query][1] for c in dev]
    votes_for_none = [vote.get("", 0.0) for vote in knn]
    print_no_entry_auc_table(dev, {"shipped classifier": classifier, "knn vote for no entry": votes_for_none})


if __name__ == "__main__":
    main()
