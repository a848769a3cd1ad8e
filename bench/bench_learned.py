"""The learned signal of the combined ranker (issue #14), measured by cross-fitting on the dev splits.

    .venv/bin/python bench/bench_learned.py [--l2 0.0005] [--iterations 1500]

A multinomial logistic regression over the cleaned, weighted query tokens (the ranker's own query
weighting), trained on the entries' phrasings plus labelled dev questions (authored and real; uncovered
questions are the class "(none)"). It is measured by 5-fold cross-fitting on the dev splits only: each dev
question is scored by a model that never saw it. Printed: Hit@1 / MRR@10 of the in-scope dev questions for
the combined ranker's other signals (at the calibrated weights, learned weight 0), the classifier alone, and
the other signals + w * p(entry), with a paired randomisation test against the first. bench/RESULTS.md ("The
learned signal") has the figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.classifier import DEFAULT_L2, ITERATIONS  # noqa: E402
from skillkb.loader import EVAL_SETS  # noqa: E402
from skillkb.retrieval import clean_query, engine_for  # noqa: E402
from skillkb.signals import weighted_query  # noqa: E402

WEIGHTS = (5.0, 10.0, 12.0, 20.0, 30.0)


def first_rank(scores: dict[str, float], expected: list[str]) -> int | None:
    return ev._first_rank([(score, entry) for entry, score in scores.items()], set(expected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--l2", type=float, default=DEFAULT_L2)
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    args = parser.parse_args()
    engine = engine_for(ROOT)
    ranker = engine.ranker("combined")
    others = {**ranker.weights, "learned": 0.0}  # the shipped classifier saw every dev case: leave it out
    dev = [c for path in EVAL_SETS.values() for c in load_cases_or_fail(ROOT, path) if c.split == "dev"]
    # The very cross-fitting `skillkb eval --calibrate` uses, at the l2 and iterations asked for.
    _, held_out, _ = ev.fit_classifier(engine, load_or_fail(ROOT), dev, l2=args.l2, iterations=args.iterations)
    folds = ev.CLASSIFIER_FOLDS
    print(f"l2 {args.l2}, {args.iterations} iterations, {folds}-fold cross-fitting over {len(dev)} dev cases")
    print()
    print("| case set | in-scope dev | variant | Hit@1 | MRR@10 | p (MRR vs without learned) |")
    print("|---|---:|---|---:|---:|---:|")
    for origin in EVAL_SETS:
        cases = [c for c in dev if c.origin == origin and c.expected]
        variants: dict[str, list[float]] = {}
        hits: dict[str, list[float]] = {}
        for case in cases:
            wq = weighted_query(clean_query(case.query), engine.lexicon)
            p = held_out[ev.case_key(case)].probabilities(wq.tokens, wq.weights)
            combined = {s.entry_id: ranker.score(s, others) for s in ranker.signals(case.query)}
            runs = {"without learned": combined, "classifier alone": {e: p.get(e, 0.0) for e in combined}}
            for w in WEIGHTS:
                runs[f"+ {w:g} p"] = {e: s + w * p.get(e, 0.0) for e, s in combined.items()}
            for name, scores in runs.items():
                rank = first_rank(scores, case.expected)
                variants.setdefault(name, []).append(1.0 / rank if rank else 0.0)
                hits.setdefault(name, []).append(float(rank == 1))
        base = variants["without learned"]
        for name, rr in variants.items():
            p_value = "" if rr is base else f"{ev.paired_randomization(rr, base):.4f}"
            print(f"| {origin} | {len(cases)} | {name} | {np.mean(hits[name]):.3f} | {np.mean(rr):.3f} | {p_value} |")


if __name__ == "__main__":
    main()
