"""Close calls: how often the default's first hit is right when ``close_call`` is set, and when it is not.

    .venv/bin/python bench/bench_close_calls.py

``close_call`` is set when the first two hits score within ``CLOSE_CALL_MARGIN`` of each other. The
threshold was chosen on real dev, cross-fitted (each dev question scored by a query classifier that never
saw it, the folds of ``skillkb eval --calibrate``); this prints that dev table at several thresholds and
the test table at the shipped one, for both case sets. Abstained questions are left out: they have no
first hit to doubt. bench/RESULTS.md ("Close calls") has the figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.abstain import FEATURES  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.loader import EVAL_SETS  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import CLOSE_CALL_MARGIN, SearchEngine, engine_for  # noqa: E402

THRESHOLDS = (0.05, 0.10, 0.15, 0.20, 0.25)
MARGIN = FEATURES.index("margin")


def answered(engine: SearchEngine, cases: list[EvalCase], held_out: ev.HeldOut | None) -> list[tuple[bool, float]]:
    """(first hit right, its margin over the second) for every in-scope case the search answered."""
    out = []
    for case in (c for c in cases if c.expected):
        with ev.held_out_classifier(engine, held_out, case):
            result = engine.search(case.query, k=ev.METRIC_K)
        if not result.abstained and len(result.results) > 1:
            out.append((result.results[0].id in case.expected, result.features[MARGIN]))
    return out


def row(label: str, outcomes: list[tuple[bool, float]], threshold: float) -> str:
    flagged = [right for right, margin in outcomes if margin < threshold]
    plain = [right for right, margin in outcomes if margin >= threshold]
    rights = sum(right for right, _ in outcomes) or 1
    wrongs = sum(not right for right, _ in outcomes) or 1

    def share(xs: list[bool]) -> str:
        return f"{sum(xs) / len(xs):.3f}" if xs else "—"

    return (
        f"| {label} | {threshold:.2f} | {len(outcomes)} | {sum(not r for r in flagged) / wrongs:.3f} "
        f"| {sum(flagged) / rights:.3f} | {share(flagged)} ({len(flagged)}) | {share(plain)} ({len(plain)}) |"
    )


def main() -> None:
    engine = engine_for(ROOT)
    sets = {name: load_cases_or_fail(ROOT, path) for name, path in EVAL_SETS.items()}
    dev = [c for cases in sets.values() for c in cases if c.split == "dev"]
    _, held_out, _ = ev.fit_classifier(engine, load_or_fail(ROOT), dev)
    print(f"CLOSE_CALL_MARGIN = {CLOSE_CALL_MARGIN}\n")
    header = "| cases | threshold | answered | wrong first hits flagged | right ones flagged "
    print(header + "| first hit right, flagged | … not flagged |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, cases in sets.items():
        outcomes = answered(engine, [c for c in cases if c.split == "dev"], held_out)
        for threshold in THRESHOLDS:
            print(row(f"{name} dev, cross-fitted", outcomes, threshold))
    for name, cases in sets.items():
        outcomes = answered(engine, [c for c in cases if c.split == "test"], None)
        print(row(f"{name} test", outcomes, CLOSE_CALL_MARGIN))


if __name__ == "__main__":
    main()
