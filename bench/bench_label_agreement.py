"""How far do two labellers of the same thread agree? Blind second labels for samples of real questions (round 10).

    .venv/bin/python bench/bench_label_agreement.py materials DIR [--split dev|test] [--sample N] [--batches B]
    .venv/bin/python bench/bench_label_agreement.py score DIR... --record FILE   # join answers, record, report
    .venv/bin/python bench/bench_label_agreement.py report FILE
    .venv/bin/python bench/bench_label_agreement.py materials DIR --split dev|test --disagreements   # third labels
    .venv/bin/python bench/bench_label_agreement.py score DIR... --record FILE --disagreements
    .venv/bin/python bench/bench_label_agreement.py report FILE --disagreements

The real set's labels are one labeller's reading of a thread (the root cause or fix it shows, under the
rules of `evals/retrieval/real/README.md`). Issue #14's targets score routers against them, so how often a
second careful labeller, reading the same thread under the same rules without seeing the first label, names
the same entry says how much agreement any router can be asked for. Earlier label checks re-read a sample
with its label in view (92-98 % agreed); this one is blind.

`materials` draws a seeded sample of one split's real questions and writes the labellers' brief (the
catalogue and labelling rules of the ceiling study, `bench_ceiling.catalogue_text`, and how to find and
label a thread) and unlabelled batches of `{id, query, source}`. Each labeller finds the thread with the
search tool over stored public threads and answers one JSON line per question: `found`, `label` (an entry
id or `none`), `also` (entries that would also help), `decided_by` (resolution, body or title) and `why`.

`report` prints, per split, agreement with the set's labels (exact: the second label is an expected entry,
or both are none; lenient: it is expected or acceptable, or an expected entry is among its `also`), Cohen's
kappa over the primary labels, where the disagreements fall, and how the routers measured so far do on the
in-scope questions both labellers agree on against those they do not: the search alone and the round-9
readers of the whole response (as `agent-reader-v2-snippets.jsonl` recorded them: dev cross-fitted, test
as shipped) and, on dev, the round-5 judges. Nothing here feeds a fit or a label.

Round 11 asks a third labeller, with the same brief and blind to both labels, about the questions the first
two disagree on (`--disagreements`). Where the third sides with one of them, that label is the majority of
three; where all three differ it stays unsettled. `report --disagreements` prints where the third sided and
the search and the round-9 readers scored against the set's labels and against the majority, on the same
sampled questions; the site shows both. The set's labels are not changed by it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_ceiling import JUDGEMENTS, catalogue_text  # noqa: E402
from recorded_run import acted_on, first_hit, jsonl, parse_command  # noqa: E402

from skillkb.api import load_cases_or_fail  # noqa: E402
from skillkb.loader import REAL_CASES_FILE  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402

CEILING = ROOT / "evals" / "retrieval" / "real" / "ceiling"
READER_RUN = CEILING / "agent-reader-v2-snippets.jsonl"
RECORD = CEILING / "label-agreement.jsonl"  # the recorded runs (dev and test samples)
SUMMARY = CEILING / "label-agreement-summary.json"  # its figures, for the site's evaluation page
THIRD = CEILING / "label-adjudication.jsonl"  # third labels of the questions the first two disagree on
SAMPLE, BATCHES = 240, 8
SEEDS = {"dev": 20261202, "test": 20261203}
NONE = "none"
SIDES = ("with the set", "with the second", "neither", "thread not found")  # where a third labeller sides
OUTCOMES = ("hit@1", "uncovered_declined", "in_scope_declined", "right_outcomes")  # a router, per reference

BRIEF = """# Labelling real users' questions by the thread (blind second labels)

You label questions that real users asked in public GitHub threads, for a retrieval evaluation of a
library of 14 skills about vLLM on Huawei Ascend NPUs. `catalogue.md` beside this file describes each
entry (what it answers, and the "Not this entry" borders) and the labelling rules. Read it first.

Your batch (`batch-K.jsonl`) has one question per line: `id`, `query` (the text as the user wrote it, mostly
an issue title) and `source` (the thread's address).

For each question:
1. Find the thread: search the stored public threads (the search tool, corpus `issues`) with the query
   text or a distinctive part of it. Use only a result whose address is the `source` (same repository, same
   issue or pull-request number). At most three searches per question; if it does not come up, answer
   `"found": false` and move on.
2. Read what the stored thread shows: a maintainer's diagnosis, the fix or PR, the log in the body, the
   setting that made the problem go away.
3. Decide, by the labelling rules, which entry answers the ROOT CAUSE or fix the thread shows, or `none`
   when the question is in the domain but no entry covers it. Name entries by their full id as in the
   catalogue (e.g. `hardware/ascend/ascend-graph-mode`).

Write your answers to `answers-K.jsonl` in this folder (K: your batch number), one JSON object per line:

    {"id": "...", "found": true, "label": "<entry id or none>", "also": ["<entry id>", ...],
     "decided_by": "resolution" | "body" | "title", "why": "<one line: what in the thread decided it>"}

`also`: other entries that would also help (may be empty). `decided_by`: `resolution` when a maintainer's
answer or a fix decided it, `body` when the post's own evidence did, `title` when the stored thread added
nothing to the title. Answer every question in your batch.

Rules: work only from this brief, `catalogue.md`, your batch and the threads you find. Do not open any other
file of the project (in particular nothing under `evals/`, `bench/` or `tests/`, and no folder named
`shared`), and do not look at other threads than the ones named in your batch.
"""


def write_materials(folder: Path, split: str, sample: int, batches: int, disagreements: bool = False) -> None:
    """The brief, the catalogue and unlabelled batches of a seeded sample of one split's real questions, or,
    with ``disagreements``, of the recorded questions whose second label disagrees with the set's (for a third
    labeller, who sees neither label)."""
    pool = sorted((c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE) if c.split == split), key=lambda c: c.id)
    if disagreements:
        chosen, brief = disputed(pool), BRIEF.replace("blind second labels", "blind third labels")
    else:
        chosen, brief = random.Random(SEEDS[split]).sample(pool, min(sample, len(pool))), BRIEF
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "brief.md").write_text(brief, encoding="utf-8")
    (folder / "catalogue.md").write_text(catalogue_text(), encoding="utf-8")
    for i in range(batches):
        rows = [{"id": c.id, "query": c.query, "source": c.source} for c in chosen[i::batches]]
        text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
        (folder / f"batch-{i}.jsonl").write_text(text, encoding="utf-8")
    print(f"wrote {folder}: brief.md, catalogue.md and {batches} batches of {len(chosen)} real {split} questions")


def disputed(pool: list[EvalCase]) -> list[EvalCase]:
    """The questions of ``pool`` whose recorded second label (thread found) is not one of the set's labels."""
    second = {r["id"]: r for r in jsonl(RECORD) if r["found"]}
    return [c for c in pool if c.id in second and not agrees(c, second[c.id], lenient=False)]


def answered(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("answers-*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = {"id", "found", "label"} - set(row)
            if missing:
                sys.exit(f"{path}:{number}: missing {sorted(missing)}; each answer needs id, found and label")
            rows.append(row)
    return rows


def score(folders: list[Path], record_path: Path, third: bool = False) -> None:
    cases = {c.id: c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE)}
    rows = sorted((r for folder in folders for r in answered(folder)), key=lambda r: r["id"])
    unknown = [r["id"] for r in rows if r["id"] not in cases]
    if unknown or len({r["id"] for r in rows}) != len(rows):
        sys.exit(f"score: answers must name each real question once (unknown or repeated: {unknown[:5]})")
    keys = ("id", "found", "label", "also", "decided_by", "why")
    record = [{"id": r["id"], "split": cases[r["id"]].split, **{k: r.get(k) for k in keys[1:]}} for r in rows]
    record_path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in record) + "\n", encoding="utf-8")
    print(f"recorded {len(rows)} answers in {record_path}\n")
    if third:
        report_adjudication(record_path)
    else:
        report(record_path)


def agrees(case: EvalCase, row: dict, lenient: bool) -> bool:
    label = str(row["label"]).strip("` ")
    if not case.expected:
        return label == NONE
    if label in case.expected:
        return True
    if not lenient:
        return False
    also = {str(a).strip("` ") for a in row.get("also") or []}
    return label in case.acceptable or bool(also & set(case.expected))


def kappa(pairs: list[tuple[str, str]]) -> float:
    """Cohen's kappa of two labellings (the set's primary label, the second labeller's)."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[k] * second[k] for k in first) / (n * n)
    return (observed - chance) / (1 - chance)


def rate(values: list[bool]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def share(values: list[bool]) -> str:
    value = rate(values)
    return "—" if value is None else f"{value:.3f}"


def groups_of(found: list[dict], cases: dict[str, EvalCase]) -> list[tuple[str, list[dict]]]:
    groups = [("all", found)]
    groups += [(f"lang {lang}", [r for r in found if cases[r["id"]].lang == lang]) for lang in ("zh", "en", "mixed")]
    groups += [("set label: an entry", [r for r in found if cases[r["id"]].expected])]
    groups += [("set label: none", [r for r in found if not cases[r["id"]].expected])]
    body = [r for r in found if "labelled from the body" in cases[r["id"]].rationale]
    groups += [("set label from the body", body), ("set label from a resolution", [r for r in found if r not in body])]
    for basis in ("resolution", "body", "title"):
        groups.append((f"second label decided by {basis}", [r for r in found if r.get("decided_by") == basis]))
    return groups


def agreement_summary(rows: list[dict], cases: dict[str, EvalCase]) -> dict:
    """Per split: exact and lenient agreement per group of questions, and kappa. What the site shows."""
    out: dict = {"rows": [], "kappa": {}, "labelled": {}, "found": {}, "disagreements": {}}
    for split in sorted({r["split"] for r in rows}):
        labelled = [r for r in rows if r["split"] == split]
        found = [r for r in labelled if r["found"]]
        pairs = [((cases[r["id"]].expected or [NONE])[0], str(r["label"]).strip("` ")) for r in found]
        out["labelled"][split], out["found"][split] = len(labelled), len(found)
        out["kappa"][split] = round(kappa(pairs), 3)
        out["disagreements"][split] = Counter(f"{a} → {b}" for a, b in pairs if a != b).most_common(12)
        out["rows"] += [
            {
                "split": split,
                "questions": name,
                "n": len(group),
                "exact": rate([agrees(cases[r["id"]], r, False) for r in group]),
                "lenient": rate([agrees(cases[r["id"]], r, True) for r in group]),
            }
            for name, group in groups_of(found, cases)
        ]
    return out


def report(record_path: Path) -> None:
    """The figures of a recorded run; the recorded run of the repository also writes them for the site."""
    cases = {c.id: c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE)}
    rows = jsonl(record_path)
    repository_record = record_path.resolve() == RECORD
    summary = site_summary(cases) if repository_record else agreement_summary(rows, cases)
    if repository_record:
        note = "bench/bench_label_agreement.py: blind second labels of samples of real dev and test questions"
        SUMMARY.write_text(json.dumps({"note": note, **summary}, indent=2, ensure_ascii=False) + "\n", "utf-8")
    for split, labelled in summary["labelled"].items():
        print(f"real {split}: {labelled} questions labelled a second time; thread found for {summary['found'][split]}")
    print("\n| split | questions | n | exact agreement | lenient agreement |")
    print("|---|---|---:|---:|---:|")
    for row in summary["rows"]:
        cells = " | ".join("—" if row[k] is None else f"{row[k]:.3f}" for k in ("exact", "lenient"))
        print(f"| {row['split']} | {row['questions']} | {row['n']} | {cells} |")
    for split, value in summary["kappa"].items():
        print(f"\nreal {split}: Cohen's kappa over the primary labels {value:.3f}; most frequent disagreements")
        for pair, n in summary["disagreements"][split]:
            print(f"  {n:3d}  {pair}")
    if repository_record:
        print(f"wrote {SUMMARY.relative_to(ROOT)}")
    for split in summary["labelled"]:
        routers_on_agreement(cases, [r for r in rows if r["found"] and r["split"] == split], split)


def site_summary(cases: dict[str, EvalCase]) -> dict:
    """What the site's evaluation page shows: the recorded second labels' agreement and, once third labels
    of the disputed questions are recorded, the adjudication."""
    rows = jsonl(RECORD)
    summary = agreement_summary(rows, cases)
    return summary | ({"adjudication": adjudication(THIRD)} if THIRD.exists() else {})


def router_hits(inside: list[EvalCase]) -> dict[str, dict[str, bool]]:
    """Per router, per in-scope question: its first choice was an expected entry. The search alone is what
    the whole-response reader run recorded it offering (dev cross-fitted, test as shipped); the judges read
    dev only."""
    judged = {j["id"]: j["answer"] for j in jsonl(JUDGEMENTS)}
    read = {r["id"]: r for r in jsonl(READER_RUN)}
    hits = {
        "search alone": {c.id: first_hit(read[c.id]) in c.expected for c in inside},
        "readers of the whole response (round 9)": {c.id: acted_on(read[c.id])[0] in c.expected for c in inside},
    }
    if all(c.id in judged for c in inside):
        hits["judges, title only (round 5)"] = {c.id: judged[c.id] in c.expected for c in inside}
    return hits


def routers_on_agreement(cases: dict[str, EvalCase], found: list[dict], split: str) -> None:
    """Hit@1 of the routers measured so far on the in-scope questions both labellers agree on, and on the
    rest, with agreement counted exactly and leniently."""
    inside = [cases[r["id"]] for r in found if cases[r["id"]].expected]
    hits = router_hits(inside)
    print(f"\nreal {split}, Hit@1 on the in-scope questions (by the set's label), by whether the second label agrees\n")
    print("| router | all | exact: agree | exact: disagree | lenient: agree | lenient: disagree |")
    print("|---|---:|---:|---:|---:|---:|")
    ids = [c.id for c in inside]
    splits = []
    for lenient in (False, True):
        agreed = {r["id"] for r in found if agrees(cases[r["id"]], r, lenient)}
        splits += [[i for i in ids if i in agreed], [i for i in ids if i not in agreed]]
    print(f"| questions | {len(ids)} | " + " | ".join(str(len(group)) for group in splits) + " |")
    for name, hit in hits.items():
        print(f"| {name} | " + " | ".join(share([hit[i] for i in group]) for group in [ids, *splits]) + " |")


def reference_labels(cases: dict[str, EvalCase], second: list[dict], third: dict[str, dict]) -> dict[str, set | None]:
    """Per question with a second label, the majority of three labellers: the set's labels where the second
    agrees with them or the third sides with the set, the second's where the third sides with it, None where
    all three differ or the third found no thread. ``none`` stands for "no entry covers it"."""
    out: dict[str, set | None] = {}
    for row in second:
        case = cases[row["id"]]
        side = "agree" if agrees(case, row, lenient=False) else _side(case, row, third.get(case.id))
        if side in ("agree", "with the set"):
            out[case.id] = set(case.expected) or {NONE}
        elif side == "with the second":
            out[case.id] = {str(row["label"]).strip("` ")}
        else:
            out[case.id] = None
    return out


def router_choices(ids: list[str]) -> dict[str, dict[str, str]]:
    """Per router, per question: the entry it acts on, or ``none`` when it declines (as the whole-response
    reader run recorded the search and the readers: dev cross-fitted, test as shipped)."""
    read = {r["id"]: r for r in jsonl(READER_RUN)}
    return {
        "search alone": {i: first_hit(read[i]) or NONE for i in ids},
        "readers of the whole response": {i: acted_on(read[i])[0] or NONE for i in ids},
    }


def outcome_figures(choices: dict[str, str], reference: dict[str, set]) -> dict[str, float | None]:
    """Hit@1 (in scope), uncovered declined, in-scope declined, right outcomes (all) against ``reference``."""
    inside = [i for i, labels in reference.items() if NONE not in labels]
    outside = [i for i, labels in reference.items() if NONE in labels]
    values = (
        [choices[i] in reference[i] for i in inside],
        [choices[i] == NONE for i in outside],
        [choices[i] == NONE for i in inside],
        [choices[i] in reference[i] for i in reference],
    )
    return dict(zip(OUTCOMES, map(rate, values), strict=True))


def adjudication(third_path: Path) -> dict:
    """Where a third blind labeller sides on the disputed questions, and the routers scored against the
    set's labels and against the majority of three, on the same sampled questions."""
    cases = {c.id: c for c in load_cases_or_fail(ROOT, REAL_CASES_FILE)}
    second = [r for r in jsonl(RECORD) if r["found"]]
    third = {r["id"]: r for r in jsonl(third_path)}
    majority = reference_labels(cases, second, third)
    out: dict = {"sides": [], "routers": []}
    for split in sorted({r["split"] for r in second}):
        disputed = [r for r in second if r["split"] == split and not agrees(cases[r["id"]], r, lenient=False)]
        sides = Counter(_side(cases[r["id"]], r, third.get(r["id"])) for r in disputed)
        out["sides"].append({"split": split, "disputed": len(disputed), **{k: sides[k] for k in SIDES}})
        settled = {r["id"]: majority[r["id"]] for r in second if r["split"] == split and majority[r["id"]]}
        by_set = {i: set(cases[i].expected) or {NONE} for i in settled}
        for name, choices in router_choices(list(settled)).items():
            for reference, labels in (("the set's labels", by_set), ("majority of three", settled)):
                row = {"split": split, "router": name, "reference": reference, "questions": len(labels)}
                out["routers"].append(row | outcome_figures(choices, labels))
    return out


def _side(case: EvalCase, second: dict, third: dict | None) -> str:
    if third is None or not third["found"]:
        return "thread not found"
    label = str(third["label"]).strip("` ")
    if label in (set(case.expected) or {NONE}):
        return "with the set"
    return "with the second" if label == str(second["label"]).strip("` ") else "neither"


def report_adjudication(third_path: Path) -> None:
    summary = adjudication(third_path)
    print("| split | disputed questions | " + " | ".join(f"third sides {s}" for s in SIDES) + " |")
    print("|---|---:|" + "---:|" * len(SIDES))
    for row in summary["sides"]:
        print(f"| {row['split']} | {row['disputed']} | " + " | ".join(str(row[s]) for s in SIDES) + " |")
    print("\n| split | router | reference | questions | " + " | ".join(OUTCOMES) + " |")
    print("|---|---|---|---:|" + "---:|" * len(OUTCOMES))
    for row in summary["routers"]:
        cells = " | ".join("—" if row[k] is None else f"{row[k]:.3f}" for k in OUTCOMES)
        print(f"| {row['split']} | {row['router']} | {row['reference']} | {row['questions']} | {cells} |")


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--sample", type=int, default=SAMPLE, help="materials: how many real questions")
        parser.add_argument("--split", choices=SEEDS, default="dev", help="materials: whose questions")
        parser.add_argument(
            "--disagreements",
            action="store_true",
            help="the questions whose recorded second label disagrees with the set's, for a third labeller: "
            "materials writes them; score and report read a record of third labels and adjudicate",
        )

    args = parse_command(__doc__, BATCHES, options)
    if args.command == "score":
        score(args.path, args.record, args.disagreements)
    elif args.command == "materials":
        if args.sample < 1:
            sys.exit(f"--sample must be at least 1 (got {args.sample})")
        write_materials(args.path[0], args.split, args.sample, args.batches, args.disagreements)
    elif args.disagreements:
        report_adjudication(args.path[0])
    else:
        report(args.path[0])


if __name__ == "__main__":
    main()
