"""The search as an agent uses it: search, then read the hits and act on the one that answers (rounds 8, 9).

    .venv/bin/python bench/bench_agent_reader.py materials DIR [--split dev|test] [--snippets] [--batches N]
    .venv/bin/python bench/bench_agent_reader.py score DIR... --record FILE    # join answers, record, print
    .venv/bin/python bench/bench_agent_reader.py report FILE       # the figures of a recorded run

A search hit carries its entry's description and "Not this entry" list (`description`, `not_for`), and the
MCP tool's description asks the agent to read them and act on the hit that answers the root cause, not
always the first, or on none. This measures that protocol with language-model readers in the agent's place,
on real dev and test questions. Each reader gets what an agent gets and nothing more: the question as the
user wrote it, what `search` returned for it (the hits in order, or `abstained` with the `related` entries,
and `close_call`), the description and not_for of the entries (listed once in the brief for all 14 rather
than repeated per hit), and the tool's own description. With ``--snippets`` (round 9) also what the MCP tool
returns beside them for each hit: its best section's heading, the snippet and the score; without it, ids only
(round 8's runs). No labels, no threads, no labelling rules, no search tool. The dev questions are searched
cross-fitted (each by a query classifier that never saw it, the folds of `skillkb eval --calibrate`), the test
questions by the shipped search. Dev and test questions are shuffled together into the batches, under opaque ids.

`score` reads the readers' answers (`DIR/answers-*.jsonl`, one `{"qid", "choice"}` per line, `choice` an
offered entry id or `none`), records them with the search's offers (`--record FILE`, never a default: a
recorded run is not overwritten by accident) and prints, per split and language, the search alone beside
search + reader: Hit@1 (the entry acted on), uncovered questions declined, in-scope questions declined,
and the paired randomisation test. A reader's choice outside the offered entries counts as acting on none
of them. The run of the shipped protocol with the whole response (`agent-reader-v2-snippets.jsonl`, round
9) is the one an agent meets; `score` or `report` of it also writes its figures to
`agent-reader-summary.json` for the site.
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from recorded_run import jsonl, parse_command  # noqa: E402

from skillkb import evaluation as ev  # noqa: E402
from skillkb.api import load_cases_or_fail, load_or_fail  # noqa: E402
from skillkb.corpus import not_this_entry  # noqa: E402
from skillkb.loader import EVAL_SETS, REAL_CASES_FILE  # noqa: E402
from skillkb.mcp_server import build_server  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import SearchResult, engine_for  # noqa: E402

# The shipped protocol read with everything the tool returns (round 9): the run the site shows.
SHIPPED_RUN = ROOT / "evals" / "retrieval" / "real" / "ceiling" / "agent-reader-v2-snippets.jsonl"
SUMMARY = SHIPPED_RUN.with_name("agent-reader-summary.json")  # its figures, for the site's evaluation page
BATCHES = 8
K = 5  # the MCP tool's default k: the hits an agent gets back


def tool_description() -> str:
    """The MCP search tool's own description, as an agent sees it."""
    import anyio
    from mcp import Client

    async def read() -> str:
        async with Client(build_server(ROOT)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return inspect.cleandoc(tools["search"].description or "")

    return anyio.run(read)


def searched(cases: list[EvalCase]) -> dict[str, SearchResult]:
    """The shipped search on test questions; on dev, each question scored by a classifier that never saw it."""
    engine = engine_for(ROOT)
    held_out: ev.HeldOut = {}
    if any(case.split == "dev" for case in cases):  # cross-fitting is for dev questions only
        every_dev = [c for path in EVAL_SETS.values() for c in load_cases_or_fail(ROOT, path) if c.split == "dev"]
        _, held_out, _ = ev.fit_classifier(engine, load_or_fail(ROOT), every_dev)
    out = {}
    for case in cases:
        with ev.held_out_classifier(engine, held_out if case.split == "dev" else None, case):
            out[case.id] = engine.search(case.query, k=K)
    return out


def offer(result: SearchResult) -> dict:
    ids = [hit.id for hit in (result.related if result.abstained else result.results)]
    return {
        "abstained": result.abstained,
        "close_call": result.close_call,
        "related" if result.abstained else "results": ids,
    }


def hit_details(result: SearchResult) -> list[dict]:
    """What the MCP tool returns for each hit besides the entry's description and not_for (an abstained
    search's ``related`` entries carry no section, so they get none)."""
    if result.abstained:
        return []
    return [
        {"id": hit.id, "heading": hit.heading, "snippet": hit.snippet, "score": round(hit.score, 3)}
        for hit in result.results
    ]


def write_materials(folder: Path, split: str | None, snippets: bool = False, batches: int = BATCHES) -> None:
    library = load_or_fail(ROOT)
    protocol = tool_description().strip()
    cases = [c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE) if split in (None, c.split)]
    results = searched(cases)
    brief = [
        "# You are a coding agent that asked a skill library a question\n\n",
        "Each line of your batch is one question a user brought you (copied as they wrote it: an issue title, a "
        "log line, a sentence) and what the library's `search` tool returned for it. You have nothing else: "
        "no thread, no other tool. For each question, decide which returned entry you would act on, as the "
        "tool's description below asks, or `none`.\n\n",
        *(
            [
                "For each returned hit your batch line also has `hits`: the heading of the entry's best-matching "
                "section, a snippet of it and the hit's score, as the tool returns them.\n\n"
            ]
            if snippets
            else []
        ),
        "Answer with one JSON line per question, in a file named as your brief says: "
        '`{"qid": "...", "choice": "<one of the returned entry ids>"}` or `{"qid": "...", "choice": "none"}`. '
        "Choose only among the entries returned for that question (`results`, or `related` when the search "
        "abstained). Read only this brief and your batch file; open no other file of the repository.\n\n",
        "## The search tool's description\n\n",
        protocol + "\n\n",
        "## What each hit carries: the entries' description and not_for\n\n",
        "(Each returned entry comes with these two texts; they are listed once here to keep the batches short.)\n",
    ]
    for entry in library.sorted_entries():
        brief.append(f"\n### `{entry.id}`\n\ndescription: {entry.description}\n\nnot_for:\n{not_this_entry(entry)}\n")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "brief.md").write_text("".join(brief), encoding="utf-8")
    random.Random(8).shuffle(cases)
    key = {}
    for i in range(batches):
        lines = []
        for n, case in enumerate(cases[i::batches]):
            qid = f"b{i}q{n:03d}"
            key[qid] = {"id": case.id, "offer": offer(results[case.id])}
            line = {"qid": qid, "question": case.query, "search": key[qid]["offer"]}
            if snippets:
                line["hits"] = hit_details(results[case.id])
            lines.append(json.dumps(line, ensure_ascii=False))
        (folder / f"batch-{i}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "key.json").write_text(json.dumps(key, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"wrote {folder}/brief.md, {batches} batches of {len(cases)} real questions and key.json (no labels)")


# (acted on the right entry, declined) for the search alone and with the reader
Outcome = tuple[bool, bool]


def outcomes(case: EvalCase, offered: dict, choice: str | None) -> tuple[Outcome, Outcome]:
    ids = offered.get("results") or offered.get("related") or []
    alone = (not offered["abstained"] and bool(ids) and ids[0] in case.expected, offered["abstained"])
    if choice is None:  # a search's own verdict stands where no reader answered
        return alone, alone
    acted = choice if choice in ids else None
    return alone, (acted is not None and acted in case.expected, acted is None)


def figures(rows: list[tuple[EvalCase, Outcome]]) -> dict[str, float | None]:
    inside = [o for c, o in rows if c.expected]
    outside = [o for c, o in rows if not c.expected]

    def share(values: list[bool]) -> float | None:
        return round(sum(values) / len(values), 3) if values else None

    return {
        "hit@1": share([o[0] for o in inside]),
        "uncovered_declined": share([o[1] for o in outside]),
        "in_scope_declined": share([o[1] for o in inside]),
    }


def answered(folder: Path) -> list[dict]:
    """One folder's questions, as recorded: what the search returned and the reader's choice (None when
    no reader answered it: the search's own verdict then stands)."""
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    answers: dict[str, str] = {}
    for path in sorted(folder.glob("answers-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                answers[row["qid"]] = str(row["choice"]).strip().strip("`")
    missing = len(set(key) - set(answers))
    print(
        f"{folder}: {len(answers)} answers for {len(key)} questions ({missing} unanswered: the search's verdict kept)"
    )
    return [{"id": q["id"], "search": q["offer"], "choice": answers.get(qid)} for qid, q in key.items()]


def score(folders: list[Path], record_path: Path) -> None:
    cases = {c.id: c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE)}
    rows = sorted((row for folder in folders for row in answered(folder)), key=lambda r: r["id"])
    if len({r["id"] for r in rows}) != len(rows):
        sys.exit("score: a question is in more than one folder; score each run on its own")
    record = [{"id": r["id"], "split": cases[r["id"]].split, **r} for r in rows]
    record_path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in record) + "\n", encoding="utf-8")
    print(f"recorded in {record_path}\n")
    print_table(record, cases, record_path)


def report(record_path: Path) -> None:
    """The figures of a recorded run, from its record alone."""
    record = jsonl(record_path)
    print_table(record, {c.id: c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE)}, record_path)


def summary(record: list[dict], cases: dict[str, EvalCase]) -> dict:
    """Per split and language (and the blind round): the search alone and with the reader; the paired test."""
    pairs: dict[str, list[tuple[EvalCase, Outcome, Outcome]]] = {}
    for r in record:
        case = cases[r["id"]]
        alone, read = outcomes(case, r["search"], r["choice"])
        pairs.setdefault(case.split, []).append((case, alone, read))
    rows, p_values = [], {}
    for split, found in sorted(pairs.items()):
        groups = [("all", found)] + [(lang, [p for p in found if p[0].lang == lang]) for lang in ("zh", "en", "mixed")]
        groups += [("round 7 (blind)", [p for p in found if "round7" in p[0].tags])]
        for name, group in (g for g in groups if g[1]):
            rows.append(
                {
                    "split": split,
                    "questions": name,
                    "in_scope": sum(bool(c.expected) for c, _, _ in group),
                    "uncovered": sum(not c.expected for c, _, _ in group),
                    "search": figures([(c, a) for c, a, _ in group]),
                    "reader": figures([(c, b) for c, _, b in group]),
                }
            )
        inside = [(a, b) for c, a, b in found if c.expected]
        p_values[split] = ev.paired_randomization([float(b[0]) for _, b in inside], [float(a[0]) for a, _ in inside])
    return {"rows": rows, "p_hit1": {k: round(v, 4) for k, v in p_values.items()}}


def print_table(record: list[dict], cases: dict[str, EvalCase], record_path: Path) -> None:
    """The figures of a run; the shipped protocol's whole-response run also writes them for the site."""
    result = summary(record, cases)
    out = SUMMARY if record_path.resolve() == SHIPPED_RUN else None
    print("| split | questions | in scope / uncovered | router | Hit@1 | uncovered declined | in-scope declined |")
    print("|---|---|---|---|---:|---:|---:|")
    for row in result["rows"]:
        sizes = f"{row['in_scope']} / {row['uncovered']}"
        for key, router in (("search", "search"), ("reader", "search + reader")):
            cells = " | ".join("—" if v is None else f"{v:.3f}" for v in row[key].values())
            print(f"| {row['split']} | {row['questions']} | {sizes} | {router} | {cells} |")
    for split, p in result["p_hit1"].items():
        print(f"\n{split}: Hit@1, search + reader vs search (paired randomisation, in scope): p = {p:.4f}")
    if out is not None:
        note = "bench/bench_agent_reader.py: the search alone and with a reader of its hits, real dev and test"
        out.write_text(json.dumps({"note": note, **result}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--split", choices=("dev", "test"), help="materials: only this split's questions")
        parser.add_argument("--snippets", action="store_true", help="materials: each hit's heading, snippet and score")

    args = parse_command(__doc__, BATCHES, options)
    if args.command == "score":
        score(args.path, args.record)
    elif args.command == "materials":
        write_materials(args.path[0], args.split, args.snippets, args.batches)
    else:
        report(args.path[0])


if __name__ == "__main__":
    main()
