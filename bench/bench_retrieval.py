"""Retrieval benchmark: prints measured figures (Markdown) for bench/RESULTS.md.

    .venv/bin/python bench/bench_retrieval.py [--sizes 10000 100000] [--queries 200]

Measures, on this machine:
1. `skillkb search` as a whole process (BM25, warm on-disk index cache), median of repeated runs;
2. query latency at the library's size for every retriever;
3. quality per retriever on the test split (from a fresh eval), the field-weighting ablation, and
   paired randomisation tests against the default retriever;
4. on synthetic corpora of 10k and 100k sections: build time and query p50 of skillkb's BM25 (bm25s
   build, numpy query), raw bm25s and rank-bm25 on the same tokens.
"""

from __future__ import annotations

import argparse
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
from skillkb.retrieval import DEFAULT_RETRIEVER, RETRIEVERS, BM25Index, SearchEngine, top_k  # noqa: E402
from skillkb.tokenize import tokenize  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def process_latency(runs: int = 15) -> list[float]:
    exe = ROOT / ".venv" / "bin" / "skillkb"
    cmd = [str(exe), "--root", str(ROOT), "search", "ACL graph capture fails with 207008", "--retriever", "bm25"]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the on-disk index cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    print(f"# Retrieval benchmark\n\nmachine: {os.cpu_count()} cores, python {sys.version.split()[0]}\n")
    times = process_latency()
    print("## `skillkb search` as a whole process (BM25, warm index cache)\n")
    print(f"median {ms(statistics.median(times))}, min {ms(min(times))}, max {ms(max(times))} over {len(times)} runs\n")

    cases = load_cases_or_fail(ROOT, Path("evals/retrieval/cases.jsonl"))
    test = [c for c in cases if c.split == "test"]
    library = load_or_fail(ROOT)
    engine = SearchEngine.open(ROOT, library=library, use_cache=False)
    print(f"## Library size: {len(engine.docs)} documents (cards + sections), {len(library.entries)} entries\n")
    print("| retriever | query p50 | query p95 |\n|---|---|---|")
    for name in RETRIEVERS:
        p50, p95 = library_latency(engine, cases, name)
        print(f"| {name} | {ms(p50)} | {ms(p95)} |")

    print(f"\n## Quality on the test split ({len(test)} cases; default retriever: {DEFAULT_RETRIEVER})\n")
    header = [
        "hit@1",
        "hit@3",
        "mrr@10",
        "ndcg@10",
        "recall@5",
        "negative_intrusion",
        "oos_abstention",
        "false_abstention",
    ]
    print("| retriever | " + " | ".join(header) + " | zh hit@1 | en hit@1 |")
    print("|---" * (len(header) + 3) + "|")
    runs = {}
    for name in RETRIEVERS:
        runs[name] = quality(engine, test, name)
        m, by_lang = runs[name].metrics(), runs[name].by("lang")
        cells = " | ".join(f"{m[h]:.3f}" for h in header)
        print(f"| {name} | {cells} | {by_lang['zh']['hit@1']:.3f} | {by_lang['en']['hit@1']:.3f} |")

    print("\n## Paired randomisation tests on test-split MRR@10 (10,000 sign flips)\n")
    print("| a | b | mean a | mean b | p |\n|---|---|---|---|---|")
    for other in RETRIEVERS:
        if other != DEFAULT_RETRIEVER:
            c = ev.compare_runs(runs[DEFAULT_RETRIEVER], runs[other])
            print(f"| {c['a']} | {c['b']} | {c['mean_a']} | {c['mean_b']} | {c['p_value']} |")

    print("\n## Field weighting (BM25, test split, abstention off)\n")
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

    vocab = sorted({t for d in engine.docs for t in tokenize(d.index_text)})
    # Queries are the eval cases' own token lists: a realistic mix of common and rare terms.
    queries = [tokenize(c.query) for c in cases if tokenize(c.query)][: args.queries]
    print(
        f"\n## Synthetic corpora (vocabulary of {len(vocab)} library tokens, Zipf, 40-160 tokens/doc; "
        f"{len(queries)} eval-case queries)\n"
    )
    print(
        "| sections | skillkb build | skillkb p50 | bm25s build | bm25s p50 | ratio to bm25s | rank-bm25 build | "
        "rank-bm25 p50 |\n|---|---|---|---|---|---|---|---|"
    )
    for size in args.sizes:
        r = bench_scale(size, vocab, queries)
        ratio = r["skillkb query p50 ms"] / r["bm25s query p50 ms"]
        print(
            f"| {size:,} | {r['skillkb build s']:.2f} s | {r['skillkb query p50 ms']:.2f} ms | "
            f"{r['bm25s build s']:.2f} s | {r['bm25s query p50 ms']:.2f} ms | {ratio:.2f} | "
            f"{r['rank-bm25 build s']:.2f} s | {r['rank-bm25 query p50 ms']:.2f} ms |"
        )


if __name__ == "__main__":
    main()
