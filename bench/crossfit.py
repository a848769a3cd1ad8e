"""What the cross-fitted dev benchmarks share (bench_reader, bench_neighbours, bench_knn, bench_scope_cue): the
dev cases in the classifier's fold order, each case's signals under the classifier that never saw it, Hit@1
with signal weights re-fitted on the other folds, and the tables they print (Hit@1; p(no entry) as AUC)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.corpus import phrase_corpus  # noqa: E402
from skillkb.loader import EVAL_SETS  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import EntrySignals, SearchEngine, clean_query, engine_for  # noqa: E402
from skillkb.tokenize import query_language  # noqa: E402


def dev_cases() -> list[EvalCase]:
    """Every dev case of both sets, in the order ``evaluation.fit_classifier`` assigns its folds by."""
    cases = (c for path in EVAL_SETS.values() for c in load_cases_or_fail(ROOT, path) if c.split == "dev")
    return sorted(cases, key=ev.case_key)


def dev_and_held_out(engine: SearchEngine) -> tuple[list[EvalCase], ev.HeldOut]:
    """The dev cases and, per case, the query classifier fitted without its fold."""
    dev = dev_cases()
    _, held_out, _ = ev.fit_classifier(engine, load_or_fail(ROOT), dev)
    return dev, held_out


def cross_fitted_dev() -> tuple[SearchEngine, list[EvalCase], dict[str, tuple[list[EntrySignals], float]]]:
    """The shipped engine, the dev cases, and each dev question's signals and p(no entry) out of fold."""
    engine = engine_for(ROOT)
    dev, held_out = dev_and_held_out(engine)
    return engine, dev, held_out_signals(engine, dev, held_out)


def training_pool() -> list[tuple[str, str, float]]:
    """What the query classifier trains on besides dev: (entry, or "" for none; text; row weight) of every
    entry's phrasings and of the training questions at the shipped row weights."""
    phrasings = [(entry, text, 1.0) for entry, text in phrase_corpus(load_or_fail(ROOT))]
    return phrasings + ev.training_rows(ROOT)


def other_folds(dev: list[EvalCase], k: int) -> list[tuple[int, str]]:
    """(index, label) of every dev case outside fold ``k``, one row per expected entry ("" when uncovered)."""
    fold = list(fold_of(dev).values())
    return [(i, label) for i, case in enumerate(dev) if fold[i] != k for label in case.expected or [""]]


def fold_of(dev: list[EvalCase]) -> dict[str, int]:
    return {ev.case_key(c): i % ev.CLASSIFIER_FOLDS for i, c in enumerate(dev)}


def held_out_signals(
    engine: SearchEngine, dev: list[EvalCase], held_out: ev.HeldOut
) -> dict[str, tuple[list[EntrySignals], float]]:
    """Per dev question: the combined ranker's signals and p(no entry), from the classifier without its fold."""
    ranker = engine.ranker("combined")
    out = {}
    for case in dev:
        with ev.held_out_classifier(engine, held_out, case):
            out[case.query] = ranker._signals(clean_query(case.query))  # type: ignore[attr-defined]
    return out


def cross_fitted_hits(
    engine: SearchEngine, dev: list[EvalCase], signals: dict[str, list[EntrySignals]], extra: tuple[str, ...] = ()
) -> dict[str, float]:
    """Hit@1 of every in-scope dev case (by case key) under ``signals``, its weights fitted per language on the
    other folds by the shipped coordinate ascent, ``extra`` signals included."""
    ranker = engine.ranker("combined")
    shipped = ranker.signals  # type: ignore[attr-defined]
    ranker.signals = signals.__getitem__  # type: ignore[attr-defined]
    fold = fold_of(dev)
    hits: dict[str, float] = {}
    try:
        for k in range(ev.CLASSIFIER_FOLDS):
            train = [c for c in dev if fold[ev.case_key(c)] != k]
            weights = {lang: ev.fit_combined(engine, train, language=lang, extra=extra)[0] for lang in ("en", "zh")}
            for case in (c for c in dev if fold[ev.case_key(c)] == k and c.expected):
                w = weights[query_language(case.query)]
                scored = [(ranker.score(s, w), s.entry_id) for s in signals[case.query]]  # type: ignore[attr-defined]
                hits[ev.case_key(case)] = float(ev._first_rank(scored, set(case.expected)) == 1)
            print(f"  fold {k}: en {weights['en']}", flush=True)
    finally:
        ranker.signals = shipped  # type: ignore[attr-defined]
    return hits


def print_hit1_table(dev: list[EvalCase], hits: dict[str, dict[str, float]], names: list[str]) -> None:
    """``hits[variant][case_key]``: 1.0 when the variant ranked an expected entry first; ``names[0]`` is the
    baseline every other column is tested against (paired randomisation)."""
    print("| case set | questions | in scope | " + " | ".join(names) + " |")
    print("|---|---|---:|" + "---:|" * len(names))
    for origin in EVAL_SETS:
        for lang in ("all", "zh", "en"):
            keys = [
                ev.case_key(c)
                for c in dev
                if c.origin == origin and c.expected and lang in ("all", query_language(c.query))
            ]
            base = [hits[names[0]][k] for k in keys]
            cells = [f"{np.mean(base):.3f}"]
            for name in names[1:]:
                values = [hits[name][k] for k in keys]
                cells.append(f"{np.mean(values):.3f} (p = {ev.paired_randomization(values, base):.2f})")
            print(f"| {origin} | {lang} | {len(keys)} | " + " | ".join(cells) + " |")


def auc(inside: list[float], outside: list[float]) -> float:
    """P(an uncovered question's score > an in-scope one's), ties counting half."""
    pairs = [(a > b) + 0.5 * (a == b) for a in outside for b in inside]
    return sum(pairs) / len(pairs)


def print_no_entry_auc_table(dev: list[EvalCase], scores: dict[str, list[float]]) -> None:
    """How well each score (one per dev case, higher = likelier that no entry answers) tells uncovered dev
    questions from in-scope ones, per case set."""
    print("\np(no entry) as the uncovered / in-scope separator, dev, out of fold (AUC)\n")
    print("| case set | in scope / uncovered | " + " | ".join(scores) + " |")
    print("|---|---|" + "---:|" * len(scores))
    for origin in EVAL_SETS:
        idx = [i for i, c in enumerate(dev) if c.origin == origin]
        cells = [
            f"{auc([s[i] for i in idx if dev[i].expected], [s[i] for i in idx if not dev[i].expected]):.3f}"
            for s in scores.values()
        ]
        sizes = f"{sum(bool(dev[i].expected) for i in idx)} / {sum(not dev[i].expected for i in idx)}"
        print(f"| {origin} | {sizes} | " + " | ".join(cells) + " |")
