"""Would the search's own scope estimate help the agent that reads its hits? (round 10, real dev)

    .venv/bin/python bench/bench_scope_cue.py

Rounds 8-9 measured the search as an agent uses it: language-model readers, in the agent's place, read the
hits and act on one or decline (`bench/bench_agent_reader.py`). The search knows something the readers are
not shown: the query classifier's probability that no entry answers (p(no entry), the abstention's main
feature). Passing it along (a per-response "likely outside the library" cue) is worth building only if it
carries information the readers' own declines lack. This bounds that from above with the recorded dev runs,
before any new reader run: each question's p(no entry) out of fold (the classifier that never saw it, as the
readers' dev material was made), then two rules an agent obeying a perfect cue would follow —

- *keep*: where the reader declined but p(no entry) < t, act on the first offered hit instead;
- *drop*: where the reader acted but p(no entry) > t, decline instead;

over a grid of t, chosen per run on the same questions (so the best cell is optimistic). Also: among the
questions a reader acted on, how well p(no entry) still separates uncovered from in-scope ones (AUC) —
the room a cue would have. Right outcomes: the right entry acted on, or an uncovered question declined,
over all real dev questions. p: paired randomisation of right outcomes, best cell against as read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from crossfit import auc, cross_fitted_dev  # noqa: E402
from recorded_run import acted_on  # noqa: E402

from skillkb import evaluation as ev  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402

RUNS_DIR = ROOT / "evals" / "retrieval" / "real" / "ceiling"  # the recorded reader runs
RUNS = {
    "v1": "agent-reader-v1.jsonl",
    "v2 ids only": "agent-reader.jsonl",
    "v3": "agent-reader-v3-dev.jsonl",
    "v2 whole response": "agent-reader-v2-snippets.jsonl",
    "v2 whole response, second run": "agent-reader-v2-snippets-rerun-dev.jsonl",
}
KEEP_BELOW = (0.02, 0.05, 0.1, 0.2)
DROP_ABOVE = (0.3, 0.5, 0.7, 0.9)
Rule = Callable[[str | None, list[str], float], str | None]


def right_outcomes(rows: list[dict], cases: dict[str, EvalCase], p_none: dict[str, float], rule: Rule) -> dict:
    """Hit@1, uncovered declined, in-scope declined, and per question whether the outcome was right."""
    right, hits, false_declines, declines = [], [], [], []
    for row in rows:
        case = cases[row["id"]]
        acted, offered = acted_on(row)
        acted = rule(acted, offered, p_none[case.id])
        if case.expected:
            hits.append(acted in case.expected)
            false_declines.append(acted is None)
            right.append(float(acted in case.expected))
        else:
            declines.append(acted is None)
            right.append(float(acted is None))
    return {
        "hit@1": share(hits),
        "uncovered declined": share(declines),
        "in-scope declined": share(false_declines),
        "right": share(right),
        "per_question": right,
    }


def share(values: list[bool]) -> float:
    return sum(values) / len(values)


def declined_in_scope(rows: list[dict], cases: dict[str, EvalCase], uncovered_terms: tuple[str, ...]) -> str:
    """How many answerable questions the reader declined, and how many of them name a topic of the
    library's scope list (`uncovered_terms`): the false declines a scope cue could not argue with."""
    declined = [cases[r["id"]] for r in rows if cases[r["id"]].expected and acted_on(r)[0] is None]
    naming = [c for c in declined if any(term in c.query.casefold() for term in uncovered_terms)]
    return f"{len(declined)} in-scope questions declined, {len(naming)} of them naming an uncovered topic"


def auc_among_acted(rows: list[dict], cases: dict[str, EvalCase], p_none: dict[str, float]) -> float:
    """Among the questions the reader acted on: P(p(no entry) of an uncovered one > that of an in-scope one)."""
    acted = [cases[r["id"]] for r in rows if acted_on(r)[0] is not None]
    outside = [p_none[c.id] for c in acted if not c.expected]
    inside = [p_none[c.id] for c in acted if c.expected]
    return auc(inside, outside)


def rules() -> dict[str, Rule]:
    out: dict[str, Rule] = {"as read": lambda acted, offered, p: acted}
    for t in KEEP_BELOW:
        out[f"keep below {t}"] = lambda acted, offered, p, t=t: (
            offered[0] if acted is None and p < t and offered else acted
        )
    for t in DROP_ABOVE:
        out[f"drop above {t}"] = lambda acted, offered, p, t=t: None if p > t else acted
    return out


def main() -> None:
    engine, dev, signals = cross_fitted_dev()
    real = {c.id: c for c in dev if c.origin == "real"}
    p_none = {c.id: signals[c.query][1] for c in real.values()}
    for name, file in RUNS.items():
        record = [json.loads(line) for line in (RUNS_DIR / file).read_text(encoding="utf-8").splitlines() if line]
        rows = [r for r in record if r["id"] in real]
        measured = {rule_name: right_outcomes(rows, real, p_none, rule) for rule_name, rule in rules().items()}
        base = measured["as read"]
        best = max(measured, key=lambda k: measured[k]["right"])
        p = ev.paired_randomization(measured[best]["per_question"], base["per_question"])
        print(f"\n### {name} ({file}, {len(rows)} real dev questions)\n")
        print(
            f"p(no entry) among the questions the reader acted on, uncovered vs in scope: AUC "
            f"{auc_among_acted(rows, real, p_none):.3f}\n"
        )
        print(declined_in_scope(rows, real, engine.lexicon.uncovered) + "\n")
        print("| rule | Hit@1 | uncovered declined | in-scope declined | right outcomes |")
        print("|---|---:|---:|---:|---:|")
        for rule_name, m in measured.items():
            cells = " | ".join(f"{m[k]:.3f}" for k in ("hit@1", "uncovered declined", "in-scope declined", "right"))
            print(f"| {rule_name} | {cells} |")
        gain = f"right outcomes {measured[best]['right']:.3f} against {base['right']:.3f}, p = {p:.3f}"
        print(f"\nbest cell: {best} ({gain})")


if __name__ == "__main__":
    main()
