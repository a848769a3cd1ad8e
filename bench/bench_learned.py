"""The learned signal of the combined ranker (issue #14), measured by cross-fitting on the dev splits.

    .venv/bin/python bench/bench_learned.py [--l2 0.0005] [--iterations 1500] [--before bench/before-REV]
                                            [--training 0:0:0,1:0:0,1:0:1]

A multinomial logistic regression over the cleaned, weighted query tokens (the ranker's own query
weighting), trained on the entries' phrasings, the training questions of ``evals/retrieval/training/``
(written ones, real titles labelled by judges from the title and real titles labelled from their threads, at
the row weights each ``--training WRITTEN:JUDGED[:THREAD]`` names; 0 or a missing THREAD leaves that origin
out) and labelled dev questions (authored and real; uncovered questions are the class
"(none)"). It is measured by 5-fold cross-fitting on the dev splits only: each dev
question is scored by a model that never saw it. Printed: Hit@1 / MRR@10 of the in-scope dev questions for
the combined ranker's other signals (at the calibrated weights, learned weight 0), the classifier alone, and
the other signals + w * p(entry), with a paired randomisation test against the first, and how well the
classifier's p(no entry) tells uncovered dev questions from in-scope ones (AUC). bench/RESULTS.md has the
figures.

With ``--before DIR`` (a folder of ``bench/measure_before.py``), also the shipped search as a whole
(weights, classifier and abstention), cross-fitted, on real dev per collection round beside that earlier
default's report: on the rounds the earlier default never saw, the one dev comparison that is fair to both.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.classifier import DEFAULT_L2, ITERATIONS, NO_ENTRY  # noqa: E402
from skillkb.evaluation import TRAINING_WEIGHTS  # noqa: E402
from skillkb.loader import EVAL_SETS  # noqa: E402
from skillkb.models import EvalCase, round_tags  # noqa: E402
from skillkb.retrieval import SearchEngine, clean_query, engine_for  # noqa: E402
from skillkb.signals import weighted_query  # noqa: E402

WEIGHTS = (5.0, 10.0, 12.0, 20.0, 30.0)
ORIGINS = ("written", "judged", "thread")  # the order of a --training spec's weights


def training_weights(spec: str) -> dict[str, float]:
    """``1:0`` or ``1:0:0.5`` → a row weight per training origin (a missing one is 0)."""
    values = [float(w) for w in spec.split(":")]
    if not 2 <= len(values) <= len(ORIGINS):
        raise SystemExit(f"--training: {spec!r} is not WRITTEN:JUDGED[:THREAD]")
    return dict(zip(ORIGINS, values + [0.0] * (len(ORIGINS) - len(values)), strict=True))


def first_rank(scores: dict[str, float], expected: list[str]) -> int | None:
    return ev._first_rank([(score, entry) for entry, score in scores.items()], set(expected))


def no_entry_auc(inside: list[float], outside: list[float]) -> float:
    """P(an uncovered question gets a higher p(no entry) than an in-scope one), ties counting half."""
    pairs = [(a > b) + 0.5 * (a == b) for a in outside for b in inside]
    return sum(pairs) / len(pairs) if pairs else float("nan")


def learned_table(engine: SearchEngine, dev: list[EvalCase], held_out: ev.HeldOut, label: str) -> None:
    ranker = engine.ranker("combined")
    for origin in EVAL_SETS:
        cases = [c for c in dev if c.origin == origin]
        variants: dict[str, list[float]] = {}
        hits: dict[str, list[float]] = {}
        no_entry: dict[bool, list[float]] = {True: [], False: []}
        for case in cases:
            wq = weighted_query(clean_query(case.query), engine.lexicon)
            p = held_out[ev.case_key(case)].probabilities(wq.tokens, wq.weights)
            no_entry[bool(case.expected)].append(p.get(NO_ENTRY, 0.0))
            if not case.expected:
                continue
            others = {**ranker.weights_for(case.query), "learned": 0.0}  # the shipped classifier saw every dev case
            combined = {s.entry_id: ranker.score(s, others) for s in ranker.signals(case.query)}
            runs = {"without learned": combined, "classifier alone": {e: p.get(e, 0.0) for e in combined}}
            for w in WEIGHTS:
                runs[f"+ {w:g} p"] = {e: s + w * p.get(e, 0.0) for e, s in combined.items()}
            for name, scores in runs.items():
                rank = first_rank(scores, case.expected)
                variants.setdefault(name, []).append(1.0 / rank if rank else 0.0)
                hits.setdefault(name, []).append(float(rank == 1))
        base = variants["without learned"]
        auc = no_entry_auc(no_entry[True], no_entry[False])
        for name, rr in variants.items():
            p_value = "" if rr is base else f"{ev.paired_randomization(rr, base):.4f}"
            print(
                f"| {label} | {origin} | {len(base)} | {name} | {np.mean(hits[name]):.3f} | {np.mean(rr):.3f} "
                f"| {p_value} | {auc:.3f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--l2", type=float, default=DEFAULT_L2)
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--before", type=Path, help="an earlier default's reports (bench/measure_before.py)")
    shipped_weights = tuple(TRAINING_WEIGHTS[origin] for origin in ORIGINS)
    shipped = ":".join(f"{w:g}" for w in shipped_weights)
    parser.add_argument(
        "--training",
        default=f"0:0:0,1:0:0,{shipped}",
        help="comma-separated WRITTEN:JUDGED[:THREAD] row weights of the training questions to compare (0 leaves "
        "one out)",
    )
    args = parser.parse_args()
    engine = engine_for(ROOT)
    dev = [c for path in EVAL_SETS.values() for c in load_cases_or_fail(ROOT, path) if c.split == "dev"]
    library = load_or_fail(ROOT)
    folds = ev.CLASSIFIER_FOLDS
    print(f"l2 {args.l2}, {args.iterations} iterations, {folds}-fold cross-fitting over {len(dev)} dev cases")
    print()
    print(
        "| training written:judged:thread | case set | in-scope dev | variant | Hit@1 | MRR@10 "
        "| p (MRR vs without learned) | no-entry AUC |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|")
    held_out: ev.HeldOut = {}
    for spec in args.training.split(","):
        weights = training_weights(spec)
        rows = ev.training_rows(ROOT, weights)
        # The very cross-fitting `skillkb eval --calibrate` uses, at the l2 and iterations asked for.
        _, fitted, _ = ev.fit_classifier(engine, library, dev, rows, l2=args.l2, iterations=args.iterations)
        learned_table(engine, dev, fitted, spec)
        if tuple(weights.values()) == shipped_weights:
            held_out = fitted
    if args.before and not held_out:  # the shipped training weights were not among those compared
        _, held_out, _ = ev.fit_classifier(engine, library, dev, l2=args.l2, iterations=args.iterations)
    if args.before:
        shipped_by_round(engine, held_out, [c for c in dev if c.origin == "real"], args.before)


def outcome_metrics(outcomes: list[tuple[int | None, bool, bool]]) -> str:
    """(first rank of the expected entry, abstained, in scope) per case → the table's cells."""
    inside = [(rank, abstained) for rank, abstained, in_scope in outcomes if in_scope]
    outside = [abstained for _, abstained, in_scope in outcomes if not in_scope]
    hit1 = np.mean([rank == 1 and not abstained for rank, abstained in inside])
    mrr = np.mean([1.0 / rank if rank and not abstained else 0.0 for rank, abstained in inside])
    false_abstention = np.mean([abstained for _, abstained in inside])
    return f"{hit1:.3f} | {mrr:.3f} | {np.mean(outside):.3f} | {false_abstention:.3f}"


def shipped_by_round(engine: SearchEngine, held_out: ev.HeldOut, dev: list[EvalCase], before: Path) -> None:
    report = json.loads((before / "report-real-dev.json").read_text(encoding="utf-8"))
    earlier = {c["id"]: c for c in report["cases"]}
    now: dict[str, tuple[int | None, bool, bool]] = {}
    for case in dev:
        with ev.held_out_classifier(engine, held_out, case):
            result = engine.search(case.query, k=ev.METRIC_K)
        rank = next((i + 1 for i, hit in enumerate(result.results) if hit.id in case.expected), None)
        now[case.id] = (rank, result.abstained, bool(case.expected))
    print(f"\nThe shipped search, cross-fitted, on real dev by collection round, beside {before.name}:\n")
    print("| dev questions | in scope / uncovered | default | Hit@1 | MRR@10 | uncovered abstained | false abst. |")
    print("|---|---|---|---:|---:|---:|---:|")
    groups = {"rounds 1-2": [c for c in dev if not round_tags(c.tags)]}
    groups |= {tag: [c for c in dev if tag in c.tags] for tag in round_tags({t for c in dev for t in c.tags})}
    for name, cases in groups.items():
        kept = [c for c in cases if c.id in earlier]
        sizes = f"{sum(bool(c.expected) for c in kept)} / {sum(not c.expected for c in kept)}"
        old = [(earlier[c.id]["hit_rank"], earlier[c.id]["abstained"], bool(c.expected)) for c in kept]
        print(f"| {name} | {sizes} | {before.name} | {outcome_metrics(old)} |")
        print(f"| {name} | {sizes} | now, cross-fitted | {outcome_metrics([now[c.id] for c in kept])} |")


if __name__ == "__main__":
    main()
