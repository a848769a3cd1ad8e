"""The Hit@1 table the cross-fitted benchmarks print: one row per case set and language, one column per
variant, each against the first variant by paired randomisation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from skillkb import evaluation as ev
from skillkb.loader import EVAL_SETS
from skillkb.models import EvalCase
from skillkb.tokenize import query_language


def print_hit1_table(dev: list[EvalCase], hits: dict[str, dict[str, float]], names: list[str]) -> None:
    """``hits[variant][case_key]``: 1.0 when the variant ranked an expected entry first; ``names[0]`` is the
    baseline every other column is tested against."""
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
