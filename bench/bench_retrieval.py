"""Retrieval benchmark: prints measured figures (Markdown) for bench/RESULTS.md.

    .venv/bin/python bench/bench_retrieval.py [--sizes 10000 100000] [--queries 200] [--before DIR ...]

Measures, on this machine:
1. `skillkb search` as a whole process (default retriever, warm on-disk index cache) side by side with a
   bare `python -c "import bm25s"`, interleaved, as a ratio (the machine is noisy: only ratios compare);
2. query latency at the library's size for every retriever;
3. quality per retriever on both case sets (authored, real users' questions), dev and test splits, by
   language; per-entry Hit@1 and the confusion table of the default on real test; paired randomisation
   tests of the default against every other retriever, and against the reports of earlier defaults in
   each ``--before DIR`` (per-case outcomes saved by ``bench/measure_before.py`` at an earlier commit);
   the same on the questions of each collection round (tags ``round3``, ``round4``; the newest round was
   collected after every choice before it was made, never read by whoever tuned the ranker);
4. the field-weighting ablation, and on synthetic corpora of 10k and 100k sections: build time and query
   p50 of skillkb's BM25 (bm25s build, numpy query), raw bm25s and rank-bm25 on the same tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.corpus import BODY_OFF, CARD_OFF, DEFAULT_WEIGHTS  # noqa: E402
from skillkb.loader import EVAL_SETS, Library  # noqa: E402
from skillkb.models import EvalCase, round_tags  # noqa: E402
from skillkb.retrieval import DEFAULT_RETRIEVER, RETRIEVERS, BM25Index, SearchEngine, top_k  # noqa: E402
from skillkb.tokenize import tokenize  # noqa: E402

QUALITY = ("hit@1", "hit@3", "hit@3_any", "mrr@10", "ndcg@10", "oos_abstention", "false_abstention")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


PROCESS_QUERIES = {"English": "ACL graph capture fails 207008", "Chinese": "图捕获失败 207008 显存不足"}


def process_latency(runs: int = 15) -> dict[str, list[float]]:
    """Whole-process times of the default search (an English and a Chinese query: only Chinese loads the
    segmenter) and of a bare ``import bm25s``, interleaved run by run."""
    python = ROOT / ".venv" / "bin" / "python"
    base = [str(ROOT / ".venv" / "bin" / "skillkb"), "--root", str(ROOT), "search"]
    commands = {
        f"skillkb search ({DEFAULT_RETRIEVER}, {lang} query)": [*base, q] for lang, q in PROCESS_QUERIES.items()
    }
    commands['python -c "import bm25s"'] = [str(python), "-c", "import bm25s"]
    subprocess.run(commands[next(iter(commands))], check=True, capture_output=True)  # warm the index cache
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, cmd in commands.items():
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times[label].append(time.perf_counter() - start)
    return times


def library_latency(engine: SearchEngine, cases, retriever: str) -> tuple[float, float]:
    engine.ranker(retriever)
    times = []
    for case in cases:
        start = time.perf_counter()
        engine.search(case.query, k=5, retriever=retriever)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def quality(engine: SearchEngine, cases, retriever: str) -> ev.EvalRun:
    return ev.run_eval(engine, cases, retriever)


def synthetic_tokens(n_docs: int, vocab: list[str], rng: np.random.Generator) -> list[list[str]]:
    ranks = np.arange(1, len(vocab) + 1)
    probs = (1 / ranks) / (1 / ranks).sum()  # Zipf-like term distribution
    lengths = rng.integers(40, 160, size=n_docs)
    flat = rng.choice(len(vocab), size=int(lengths.sum()), p=probs)
    out, pos = [], 0
    for length in lengths:
        out.append([vocab[i] for i in flat[pos : pos + length]])
        pos += length
    return out


def bench_scale(n_docs: int, vocab: list[str], queries: list[list[str]]) -> dict[str, float]:
    import bm25s
    from rank_bm25 import BM25Okapi

    rng = np.random.default_rng(n_docs)
    corpus = synthetic_tokens(n_docs, vocab, rng)
    result: dict[str, float] = {}

    start = time.perf_counter()
    ours = BM25Index.build(corpus)
    result["skillkb build s"] = time.perf_counter() - start
    times = []
    for q in queries:
        t = time.perf_counter()
        top_k(ours.scores(q), 10)
        times.append(time.perf_counter() - t)
    result["skillkb query p50 ms"] = statistics.median(times) * 1000

    start = time.perf_counter()
    raw = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    raw.index(corpus, show_progress=False)
    result["bm25s build s"] = time.perf_counter() - start
    times = []
    for q in queries:
        known = [t for t in q if t in raw.vocab_dict]
        t = time.perf_counter()
        scores = raw.get_scores(known)
        np.argpartition(-scores, 9)[:10]
        times.append(time.perf_counter() - t)
    result["bm25s query p50 ms"] = statistics.median(times) * 1000

    start = time.perf_counter()
    baseline = BM25Okapi(corpus)
    result["rank-bm25 build s"] = time.perf_counter() - start
    times = []
    for q in queries[: max(10, len(queries) // 10)]:  # rank-bm25 is ~100x slower: fewer queries suffice
        t = time.perf_counter()
        scores = baseline.get_scores(q)
        np.argpartition(-scores, 9)[:10]
        times.append(time.perf_counter() - t)
    result["rank-bm25 query p50 ms"] = statistics.median(times) * 1000
    return result


def quality_table(runs: dict[str, ev.EvalRun]) -> None:
    print("| retriever | " + " | ".join(QUALITY) + " | zh hit@1 | en hit@1 | mixed hit@1 |")
    print("|---" * (len(QUALITY) + 4) + "|")
    for name, run in runs.items():
        m, by_lang = run.metrics(), run.by("lang")
        langs = " | ".join(f"{by_lang[x]['hit@1']:.3f}" if x in by_lang else "—" for x in ("zh", "en", "mixed"))
        print(f"| {name} | " + " | ".join(f"{m[h]:.3f}" for h in QUALITY) + f" | {langs} |")


def paired_tests(runs: dict[str, ev.EvalRun]) -> None:
    print("| a | b | metric | cases | mean a | mean b | p |\n|---|---|---|---|---|---|---|")
    for other in runs:
        if other == DEFAULT_RETRIEVER:
            continue
        for metric in ("hit@1", "mrr@10"):
            c = ev.compare_runs(runs[DEFAULT_RETRIEVER], runs[other], metric)
            print(f"| {c['a']} | {c['b']} | {metric} | {c['cases']} | {c['mean_a']} | {c['mean_b']} | {c['p_value']} |")


def before_scores(report: dict, metric: str) -> dict[str, float]:
    """Per-case scores of a saved ``skillkb eval --json`` report (in-scope cases; abstaining scores 0)."""
    out = {}
    for case in report["cases"]:
        if case["expected"]:
            rank = None if case["abstained"] else case["hit_rank"]
            out[case["id"]] = float(rank == 1) if metric == "hit@1" else (1.0 / rank if rank else 0.0)
    return out


def against_before(run: ev.EvalRun, report: dict, label: str) -> None:
    for metric in ("hit@1", "mrr@10"):
        theirs = before_scores(report, metric)
        ours = {o.id: ev.case_metrics(o)[metric] for o in run.outcomes if o.in_scope and o.id in theirs}
        ids = sorted(ours)
        a, b = [ours[i] for i in ids], [theirs[i] for i in ids]
        p = ev.paired_randomization(a, b)
        means = f"{sum(a) / len(a):.4f} | {sum(b) / len(b):.4f}"
        print(f"| {run.retriever} | {label} | {metric} | {len(ids)} | {means} | {p:.4f} |")
    then, now = report["metrics"], run.metrics()
    print(
        f"\n{label} on the same cases: oos_abstention {then['oos_abstention']:.3f}, false_abstention "
        f"{then['false_abstention']:.3f} (now {now['oos_abstention']:.3f} / {now['false_abstention']:.3f})"
    )
    by_lang = run.by("lang")
    for lang in ("zh", "en"):  # the language target, for the earlier default too
        scores = before_scores({"cases": [c for c in report["cases"] if c.get("lang") == lang]}, "hit@1")
        if scores and lang in by_lang:
            mean = sum(scores.values()) / len(scores)
            print(f"{label} {lang} hit@1 {mean:.3f} (now {by_lang[lang]['hit@1']:.3f}, {len(scores)} in scope)")
    print()


def against_befores(folders: list[Path], name: str, run: ev.EvalRun) -> None:
    """Paired tests of ``run`` against each earlier default's saved outcomes on the same cases."""
    for folder in folders:
        path = folder / name
        if not path.is_file():
            continue
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        report = json.loads(path.read_text())
        ids = {o.id for o in run.outcomes}
        report = {**report, "cases": [c for c in report["cases"] if c["id"] in ids]}
        if not any(c["expected"] for c in report["cases"]):
            print(f"\n{shown} holds none of these cases (they came later).\n")
            continue
        print(f"\nAgainst an earlier default ({shown}):\n")
        print("| a | b | metric | cases | mean a | mean b | p |\n|---|---|---|---|---|---|---|")
        report["metrics"] = subset_metrics(report["cases"])
        against_before(run, report, folder.name)


def subset_metrics(cases: list[dict]) -> dict[str, float]:
    """Abstention rates of saved outcomes on a subset (the saved metrics are over the whole split)."""
    ins = [c for c in cases if c["expected"]]
    oos = [c for c in cases if not c["expected"]]
    return {
        "oos_abstention": sum(c["abstained"] for c in oos) / len(oos) if oos else 0.0,
        "false_abstention": sum(c["abstained"] for c in ins) / len(ins) if ins else 0.0,
    }


def entry_table(run: ev.EvalRun) -> None:
    print("| expected entry | cases | hit@1 | first hit instead (count) |\n|---|---|---|---|")
    for expected, row in run.confusion().items():
        total = sum(row.values())
        wrong = sorted(((n, got) for got, n in row.items() if got != expected), reverse=True)[:3]
        others = ", ".join(f"{got.rsplit('/', 1)[-1]} {n}" for n, got in wrong) or "—"
        print(f"| {expected.rsplit('/', 1)[-1]} | {total} | {row.get(expected, 0) / total:.2f} | {others} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--before", type=Path, action="append", default=[], help="reports of an earlier default")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    print(f"# Retrieval benchmark\n\nmachine: {os.cpu_count()} cores, python {sys.version.split()[0]}\n")
    print_process_latency()
    library = load_or_fail(ROOT)
    engine = SearchEngine.open(ROOT, library=library, use_cache=False)
    sets = {name: load_cases_or_fail(ROOT, path) for name, path in EVAL_SETS.items()}
    print_library_latency(engine, library, sets["authored"])
    test_runs = print_quality(engine, sets, args.before)
    real = test_runs["real"][DEFAULT_RETRIEVER]
    print(f"\n## Real test split: where each expected entry's questions went ({DEFAULT_RETRIEVER})\n")
    entry_table(real)
    failing = [o for o in real.outcomes if not o.passed]
    print(f"\n{len(failing)} of {len(real.outcomes)} real test cases fail (listed in evals/retrieval/real/results/).\n")
    print_field_weighting(library, [c for c in sets["authored"] if c.split == "test"])
    print_synthetic(engine, sets["authored"], args.sizes, args.queries)


def print_process_latency() -> None:
    times = process_latency()
    print(f"## `skillkb search` as a whole process ({DEFAULT_RETRIEVER}, warm index cache) beside `import bm25s`\n")
    print("| command | median | min | max | ratio to bare import (medians) |\n|---|---|---|---|---|")
    bare = statistics.median(times['python -c "import bm25s"'])
    for label, values in times.items():
        ratio = statistics.median(values) / bare
        print(f"| {label} | {ms(statistics.median(values))} | {ms(min(values))} | {ms(max(values))} | {ratio:.2f} |")
    print(f"\n{len(next(iter(times.values())))} interleaved runs of each.\n")


def print_library_latency(engine: SearchEngine, library: Library, authored: list[EvalCase]) -> None:
    print(f"## Library size: {len(engine.docs)} documents (cards + sections), {len(library.entries)} entries\n")
    print("| retriever | query p50 | query p95 |\n|---|---|---|")
    for name in RETRIEVERS:
        p50, p95 = library_latency(engine, authored, name)
        print(f"| {name} | {ms(p50)} | {ms(p95)} |")
    p50, p95 = library_latency(SearchEngine.open(ROOT), authored, DEFAULT_RETRIEVER)
    print(f"| {DEFAULT_RETRIEVER}, saved index (plain-Python query path) | {ms(p50)} | {ms(p95)} |")


def print_quality(
    engine: SearchEngine, sets: dict[str, list[EvalCase]], befores: list[Path]
) -> dict[str, dict[str, ev.EvalRun]]:
    """Every retriever on every set and split, the test splits also per collection round and against the
    earlier defaults' reports; returns the test runs."""
    test_runs: dict[str, dict[str, ev.EvalRun]] = {}
    for set_name, cases in sets.items():
        for split in ("dev", "test"):
            selected = [c for c in cases if c.split == split]
            runs = {name: ev.run_eval(engine, selected, name) for name in RETRIEVERS}
            note = " — the query classifier was trained on these: in-sample" if split == "dev" else ""
            print(f"\n## {set_name} cases, {split} split ({len(selected)} cases; default: {DEFAULT_RETRIEVER}){note}\n")
            quality_table(runs)
            if split == "test":
                test_runs[set_name] = runs
                print(f"\nPaired randomisation tests, {set_name} test (10,000 sign flips):\n")
                paired_tests(runs)
                against_befores(befores, f"report-{set_name}-{split}.json", runs[DEFAULT_RETRIEVER])
                print_rounds(engine, set_name, selected, befores)
    return test_runs


def print_rounds(engine: SearchEngine, set_name: str, selected: list[EvalCase], befores: list[Path]) -> None:
    """The test questions of each later collection round on their own."""
    for tag in reversed(round_tags({t for c in selected for t in c.tags})):
        fresh = [c for c in selected if tag in c.tags]
        print(f"\n## {set_name} test, questions of collection {tag} only ({len(fresh)} cases)\n")
        fresh_runs = {name: ev.run_eval(engine, fresh, name) for name in RETRIEVERS}
        quality_table(fresh_runs)
        against_befores(befores, f"report-{set_name}-test.json", fresh_runs[DEFAULT_RETRIEVER])


def print_field_weighting(library: Library, test: list[EvalCase]) -> None:
    print("\n## Field weighting (BM25, authored test split, abstention off)\n")
    print("| corpus | documents | hit@1 | mrr@10 |\n|---|---|---|---|")
    for label, weights in (
        ("cards + sections (default)", DEFAULT_WEIGHTS),
        ("cards only (no body)", BODY_OFF),
        ("sections only (no card)", CARD_OFF),
    ):
        variant = SearchEngine.open(ROOT, weights=weights, library=library, use_cache=False)
        outcomes = []
        for case in [c for c in test if c.expected]:
            result = variant.search(case.query, k=10, retriever="bm25", abstain=False)
            outcomes.append(ev.outcome_for(case, result.results, False, 0.0))
        m = ev.aggregate_metrics(outcomes)
        print(f"| {label} | {len(variant.docs)} | {m['hit@1']:.3f} | {m['mrr@10']:.3f} |")


def print_synthetic(engine: SearchEngine, authored: list[EvalCase], sizes: list[int], n_queries: int) -> None:
    vocab = sorted({t for d in engine.docs for t in tokenize(d.index_text)})
    # Queries are the eval cases' own token lists: a realistic mix of common and rare terms.
    queries = [tokenize(c.query) for c in authored if tokenize(c.query)][:n_queries]
    print(
        f"\n## Synthetic corpora (vocabulary of {len(vocab)} library tokens, Zipf, 40-160 tokens/doc; "
        f"{len(queries)} eval-case queries)\n"
    )
    print(
        "| sections | skillkb build | skillkb p50 | bm25s build | bm25s p50 | ratio to bm25s | rank-bm25 build | "
        "rank-bm25 p50 |\n|---|---|---|---|---|---|---|---|"
    )
    for size in sizes:
        r = bench_scale(size, vocab, queries)
        ratio = r["skillkb query p50 ms"] / r["bm25s query p50 ms"]
        print(
            f"| {size:,} | {r['skillkb build s']:.2f} s | {r['skillkb query p50 ms']:.2f} ms | "
            f"{r['bm25s build s']:.2f} s | {r['bm25s query p50 ms']:.2f} ms | {ratio:.2f} | "
            f"{r['rank-bm25 build s']:.2f} s | {r['rank-bm25 query p50 ms']:.2f} ms |"
        )


if __name__ == "__main__":
    main()
