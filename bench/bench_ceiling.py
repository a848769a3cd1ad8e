"""How far can the question text alone take a router? Independent judges beside the shipped search, on real dev.

    .venv/bin/python bench/bench_ceiling.py materials DIR     # the judges' brief: catalogue + unlabelled batches
    .venv/bin/python bench/bench_ceiling.py [--judge FILE]    # score the recorded judgements beside the search,
                                                              # and write evals/retrieval/real/ceiling/summary.json

Issue #14's targets ask a search over a question's text (mostly an issue title) for the entry that answers
its root cause, which the labeller read in the whole thread. This measures what that text supports: careful
readers (language-model judges, one per batch) saw the question exactly as the search sees it, a catalogue
of the 14 entries (description and "Not this entry") and the labelling rules of ``evals/retrieval/real/
README.md``, and nothing else (no thread, no labels, no search tool). Each named the entry that answers the
root cause or ``none``, and up to three entries to offer. Only **dev** questions were judged: the figures
bound what is reachable without reading a single test question.

Printed: the judges, the shipped search (cross-fitted: each dev question scored by a query classifier
that never saw it, the folds of ``skillkb eval --calibrate``) and the two together (the search, then a judge
choosing among what it returned: ``reader_outcomes``) on the same questions, by language, by how the
label was decided (a resolution in the thread, or the body alone) and by the judges' own confidence; and
the paired randomisation test between them. ``bench/RESULTS.md`` ("What the question text supports") has
the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.loader import EVAL_SETS, REAL_CASES_FILE  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import SearchResult, engine_for  # noqa: E402

JUDGEMENTS = ROOT / "evals" / "retrieval" / "real" / "ceiling" / "judge-dev.jsonl"
SUMMARY = ROOT / "evals" / "retrieval" / "real" / "ceiling" / "summary.json"  # the site's evaluation page reads it
BATCHES = 6
NONE = "none"
READER_ROUTER = "search, then a judge reads its hits"
READER_K = 5  # the hits an agent gets back (the MCP tool's default k) and reads before it acts

# (first answer right, any of the top three right or acceptable, abstained) for one in-scope question;
# (abstained,) is all that matters for an uncovered one.
Outcome = tuple[bool, bool, bool]


def catalogue_text() -> str:
    """What each entry answers and is not for, and the real set's labelling rules (without its counts)."""
    library = load_or_fail(ROOT)
    parts = [
        "# The library: 14 entries\n",
        "Each entry answers a family of problems. Pick, for a user's question, the entry whose content would "
        "fix or explain the ROOT CAUSE the question most likely has. If the question is in the vLLM/Ascend "
        "domain but no entry covers it, the answer is `none`.\n",
    ]
    for entry in library.sorted_entries():
        text = (ROOT / entry.id / "SKILL.md").read_text(encoding="utf-8")
        description = re.search(r"^description: (.*)$", text, re.M)
        parts.append(f"\n## `{entry.id}`\n\n{description.group(1).strip(chr(39)) if description else ''}\n")
        not_this = re.search(r"### Not this entry\n(.*?)\n## ", text, re.S)
        if not_this:
            parts.append("\nNot this entry:\n" + not_this.group(1).strip() + "\n")
    readme = (ROOT / REAL_CASES_FILE.parent / "README.md").read_text(encoding="utf-8")
    rules = readme.split("## How labels are decided")[1].split("## The numbers")[0]
    rules = re.sub(r" \(\d+ cases\)", "", rules)  # counts would hint at the label distribution
    parts.append("\n# Labelling rules (how the reference answers were decided)\n" + rules)
    return "".join(parts)


def write_materials(folder: Path) -> None:
    """The judges' brief: what each entry answers and is not for, the labelling rules, unlabelled batches."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "catalogue.md").write_text(catalogue_text(), encoding="utf-8")
    dev = [c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE) if c.split == "dev"]
    random.Random(18).shuffle(dev)
    for i in range(BATCHES):
        lines = [json.dumps({"id": c.id, "query": c.query}, ensure_ascii=False) for c in dev[i::BATCHES]]
        (folder / f"batch-{i}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {folder}/catalogue.md and {BATCHES} batches of {len(dev)} dev questions (no labels)")


def judge_outcomes(cases: dict[str, EvalCase], judgements: list[dict]) -> dict[str, Outcome]:
    out = {}
    for j in judgements:
        case = cases[j["id"]]
        good = set(case.expected) | set(case.acceptable)
        out[case.id] = (j["answer"] in case.expected, bool(good & set(j["top3"][:3])), j["answer"] == NONE)
    return out


def search_outcomes(dev: list[EvalCase]) -> tuple[dict[str, Outcome], dict[str, SearchResult]]:
    """The shipped search on every real dev question, each scored by a classifier that never saw it; and
    what it returned, for the reader in the loop."""
    engine = engine_for(ROOT)
    every_dev = [c for path in EVAL_SETS.values() for c in load_cases_or_fail(ROOT, path) if c.split == "dev"]
    _, held_out, _ = ev.fit_classifier(engine, load_or_fail(ROOT), every_dev)
    out, results = {}, {}
    for case in dev:
        with ev.held_out_classifier(engine, held_out, case):
            result = engine.search(case.query, k=READER_K)
        ids = [hit.id for hit in (result.related if result.abstained else result.results)][:3]
        good = set(case.expected) | set(case.acceptable)
        first_right = not result.abstained and bool(ids) and ids[0] in case.expected
        out[case.id], results[case.id] = (first_right, bool(good & set(ids)), result.abstained), result
    return out, results


def reader_outcomes(
    cases: dict[str, EvalCase], judgements: list[dict], results: dict[str, SearchResult]
) -> dict[str, Outcome]:
    """A simulation of the agent the MCP tool's description asks for: it reads the hits the search returned
    (up to READER_K, or the `related` entries of an abstention) with their description and not_for, and acts
    on the one that answers the root cause. Its reading is the judge's recorded answer: acted on when the
    search returned that entry; otherwise the agent keeps the search's first hit, or, when the search
    abstained, acts on nothing; a judge's `none` is the agent declining every hit. The judges chose from the
    whole catalogue, so this assumes a reader shown fewer entries picks the same one when it is among them;
    `bench/bench_agent_reader.py` measures the protocol with readers who see only what the tool returns."""
    out = {}
    for j in judgements:
        case, result = cases[j["id"]], results[j["id"]]
        offered = [hit.id for hit in (result.related if result.abstained else result.results)][:READER_K]
        chosen = j["answer"] in offered
        declined = j["answer"] == NONE or (result.abstained and not chosen)
        first = j["answer"] if chosen else (offered[0] if offered else None)
        shown = [hit.id for hit in (result.related if result.abstained else result.results)][:3]
        good = set(case.expected) | set(case.acceptable)
        out[case.id] = (not declined and first in case.expected, bool(good & set(shown)), declined)
    return out


def figures(cases: list[EvalCase], outcomes: dict[str, Outcome]) -> dict[str, float | None]:
    inside = [outcomes[c.id] for c in cases if c.expected]
    outside = [outcomes[c.id] for c in cases if not c.expected]

    def share(values: list[bool]) -> float | None:
        return round(sum(values) / len(values), 3) if values else None

    return {
        "hit@1": share([o[0] for o in inside]),
        "hit@3_any": share([o[1] for o in inside]),
        "oos_abstention": share([o[2] for o in outside]),
        "false_abstention": share([o[2] for o in inside]),
    }


def cells(values: dict[str, float | None]) -> str:
    return " | ".join("—" if v is None else f"{v:.3f}" for v in values.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("materials", nargs="?", help="'materials' to write the judges' brief to DIR")
    parser.add_argument("folder", nargs="?", type=Path)
    parser.add_argument("--judge", type=Path, default=JUDGEMENTS, help="recorded judgements (JSON lines)")
    parser.add_argument("--out", type=Path, default=SUMMARY, help="where the summary for the site goes")
    args = parser.parse_args()
    if args.materials:
        if args.materials != "materials" or args.folder is None:
            parser.error("usage: bench_ceiling.py materials DIR")
        write_materials(args.folder)
        return
    cases = {c.id: c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE)}
    judgements = [json.loads(line) for line in args.judge.read_text(encoding="utf-8").splitlines() if line.strip()]
    dev = [cases[j["id"]] for j in judgements]
    if any(c.split != "dev" for c in dev):
        sys.exit(f"{args.judge}: judgements must cover dev questions only")
    judged = judge_outcomes(cases, judgements)
    searched, results = search_outcomes(dev)
    read = reader_outcomes(cases, judgements, results)
    confidence = {j["id"]: j["confidence"] for j in judgements}
    routers = {"judges": judged, "search": searched, "reader_in_loop": read}
    rows = [router_row(name, group, routers) for name, group in question_groups(dev, confidence)]
    print(f"{len(dev)} real dev questions ({sum(bool(c.expected) for c in dev)} in scope), judged once each\n")
    print_rows(rows)
    summary = {"note": "bench/bench_ceiling.py: judges vs the shipped search (cross-fitted) on real dev", "rows": rows}
    summary |= print_paired_tests([c for c in dev if c.expected], judged, searched, read)
    args.out.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


def question_groups(dev: list[EvalCase], confidence: dict[str, str]) -> list[tuple[str, list[EvalCase]]]:
    """The groups every router is scored on: all, per language, by what decided the label, by judge confidence."""
    body = [c for c in dev if "labelled from the body" in c.rationale]
    groups: list[tuple[str, list[EvalCase]]] = [("all real dev", dev)]
    groups += [(f"lang {lang}", [c for c in dev if c.lang == lang]) for lang in ("zh", "en", "mixed")]
    groups += [("label from a resolution", [c for c in dev if c not in body]), ("label from the body alone", body)]
    groups += [(f"judge confidence {v}", [c for c in dev if confidence[c.id] == v]) for v in ("high", "medium", "low")]
    return groups


def router_row(name: str, group: list[EvalCase], routers: dict[str, dict[str, Outcome]]) -> dict:
    row: dict = {
        "questions": name,
        "in_scope": sum(bool(c.expected) for c in group),
        "uncovered": sum(not c.expected for c in group),
    }
    return row | {router: figures(group, outcomes) for router, outcomes in routers.items()}


def print_rows(rows: list[dict]) -> None:
    print("| questions | in scope / uncovered | router | Hit@1 | Hit@3 any | uncovered abstained | false abst. |")
    print("|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        sizes = f"{row['in_scope']} / {row['uncovered']}"
        print(f"| {row['questions']} | {sizes} | judges | {cells(row['judges'])} |")
        print(f"| {row['questions']} | {sizes} | search, cross-fitted | {cells(row['search'])} |")
        print(f"| {row['questions']} | {sizes} | {READER_ROUTER} | {cells(row['reader_in_loop'])} |")


def print_paired_tests(
    inside: list[EvalCase], judged: dict[str, Outcome], searched: dict[str, Outcome], read: dict[str, Outcome]
) -> dict:
    """Hit@1 of the three routers compared pairwise over the in-scope questions; returns the summary's figures."""
    a = [float(judged[c.id][0]) for c in inside]
    b = [float(searched[c.id][0]) for c in inside]
    c = [float(read[q.id][0]) for q in inside]
    p_value = ev.paired_randomization(a, b)
    neither = sum(not x and not y for x, y in zip(a, b, strict=True))
    print(f"\nHit@1, judges vs search (paired randomisation, {len(inside)} in scope): p = {p_value:.4f}")
    print(f"in-scope questions neither gets first: {neither} of {len(inside)}")
    print(
        f"Hit@1, {READER_ROUTER} vs search: p = {ev.paired_randomization(c, b):.4f}; vs judges: p = "
        f"{ev.paired_randomization(c, a):.4f}"
    )
    # The table counts what a router offers when it abstains; the eval reports count an abstention as nothing.
    strict = sum(searched[q.id][1] and not searched[q.id][2] for q in inside) / len(inside)
    print(f"search Hit@3 any with an abstention counted as an empty ranking (as in the eval reports): {strict:.3f}")
    return {"p_hit1": round(p_value, 4), "neither_first": neither, "in_scope": len(inside)}


if __name__ == "__main__":
    main()
