"""The documentation site: Markdown pages generated from the entries, and the ``skillkb docs`` commands.

Nothing here writes into ``docs/``: ``site_hooks.py`` (the mkdocs hooks named in ``mkdocs.yml``) turns the
pages built by :func:`generate` into virtual files at build time. Every generator is a pure function of
the library (and the committed eval reports), so two builds give identical pages.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import posixpath
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .citations import github_url
from .citations import link_citations as shared_link_citations
from .fsutil import read_text
from .htmlsafety import html_text, md_text
from .loader import Entry, Library
from .models import IndexEntry, Readset, newest_round

ANCHOR_NAMES = ("vllm_ascend", "vllm", "cann", "torch", "torch_npu")
RESULTS_DIR = Path("evals/retrieval/results")
REAL_RESULTS_DIR = Path("evals/retrieval/real/results")
TIER_TITLES = {
    1: "Tier 1 — generic vLLM mechanisms",
    2: "Tier 2 — vLLM Ascend plugin features",
    3: "Tier 3 — Ascend / CANN / torch_npu constraints",
}
# Pages another tool writes into docs/; the site links them and stands in for them until they exist.
EXTERNAL_PAGES = {
    "reference-matrix.md": ("Reference matrix", "skillkb coverage"),
    "skill-coverage.md": ("Skill coverage", "skillkb coverage"),
    "ownership.md": ("Ownership", "skillkb coverage"),
    "upstream-drift.md": ("Upstream drift", "skillkb drift"),
}
TIER_TABLE_MARKER = "<!-- skillkb:tier-table -->"
# Overview pages full of entry names and eval queries would outrank the entries themselves in search.
NO_SEARCH = "---\nsearch:\n  exclude: true\n---\n\n"

Warn = Callable[[str], None]


@dataclass
class SitePages:
    """What one build adds to the docs: Markdown pages, binary assets and the navigation."""

    pages: dict[str, str] = field(default_factory=dict)  # src_uri -> Markdown
    assets: dict[str, bytes] = field(default_factory=dict)  # src_uri -> bytes (charts)
    nav: list = field(default_factory=list)
    tier_table: str = ""  # fills the marker in the hand-written docs/tiers.md


# ------------------------------------------------------------------------------------------- paths


def entry_page(entry_id: str) -> str:
    return f"{entry_id}/index.md"


def reference_page(entry_id: str, name: str) -> str:
    return f"{entry_id}/references/{name}"


def topic_page(topic: str) -> str:
    return f"topics/{topic}.md"


def rel(from_page: str, to_page: str) -> str:
    """A Markdown link from one page's source to another's (mkdocs resolves and checks it)."""
    return posixpath.relpath(to_page, posixpath.dirname(from_page) or ".")


def cell(text: object) -> str:
    """Any value as inert text for Markdown (and one table cell): never HTML, a link or emphasis."""
    return md_text(text).strip()


def code(text: object) -> str:
    """Any value as an inline code span (shown literally; backticks and line breaks cannot break out)."""
    return "`" + " ".join(str(text).replace("`", "'").split()) + "`"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------- citations


def link_citations(text: str, readsets: list[Readset], warn: Warn, where: str) -> str:
    """Turn each ``[repo@sha:path#La-Lb]`` into a link to the file at the pinned full commit and lines.

    Code is left alone; a citation that does not resolve stays plain text and is reported
    (``skillkb validate`` names the fix; ``--strict`` fails on it).
    """
    linked, unresolved = shared_link_citations(text, readsets, lambda citation: f"`{citation.label}`")
    for citation, reason in unresolved:
        warn(f"{where}: citation {citation.text} does not resolve ({reason}); run `skillkb validate`")
    return linked


# -------------------------------------------------------------------------------------- entry pages


def entry_markdown(entry: Entry, library: Library, record: IndexEntry, warn: Warn) -> str:
    """One entry's page: title, Chinese title, the record panel, the linked body, readsets, references."""
    from .validate import missing_gates

    meta = entry.meta
    assert meta is not None and entry.body is not None
    page = entry_page(entry.id)
    body = link_citations(entry.body.text, meta.readsets, warn, entry.skill_path)
    title, rest = _split_title(body, meta.title)
    gates = missing_gates(entry, library)
    parts = [
        f"# {title}\n",
        f"**{cell(meta.title_zh)}** · [中文摘要](#中文摘要) · {code(entry.id)}\n",
        _panel(entry, library, record, gates, page),
        rest.strip() + "\n",
        readsets_markdown(entry, library),
    ]
    if entry.references:
        links = [f"- [{name}]({rel(page, reference_page(entry.id, name))})" for name in sorted(entry.references)]
        parts.append("## Reference pages\n\n" + "\n".join(links) + "\n")
    return "\n".join(parts)


def _split_title(body: str, fallback: str) -> tuple[str, str]:
    """The body's leading ``# Title`` (or the entry title) and the text after it."""
    match = re.match(r"\s*#\s+(.+?)\s*\n", body)
    if match:
        return match[1], body[match.end() :]
    return cell(fallback), body


def _panel(entry: Entry, library: Library, record: IndexEntry, gates: list[str], page: str) -> str:
    meta = entry.meta
    assert meta is not None
    state = meta.status.state.value
    status = f"`{state}`" + (f" — {cell(meta.status.reason)}" if meta.status.reason else "")
    gate_text = "; ".join(cell(g) for g in gates) if gates else f"none — meets the `{state}` gates"
    validation = meta.empirical_validation
    evidence = cell(validation.evidence)
    if validation.hardware:
        evidence += f" (hardware: {cell(validation.hardware)}, {validation.date})"
    rows = [
        ["Tier", f"{meta.tier} — {TIER_TITLES[meta.tier].split(' — ', 1)[1]}"],
        ["Canonical owner", code(meta.owner)],
        ["Status", status],
        ["Gates still missing", gate_text],
        ["Empirical validation", f"`{validation.state.value}` — {evidence}"],
        ["Version anchors", anchors_text(entry) or "none"],
        ["Topics", ", ".join(f"[{cell(t)}]({rel(page, topic_page(t))})" for t in meta.topics) or "none"],
        ["Cross-references", cross_refs_text(entry, library, page) or "none"],
        ["Digest", code(record.digest)],
        ["Source", code(entry.skill_path)],
    ]
    body = table(["", ""], [[f"**{k}**", v] for k, v in rows])
    return '!!! info "Entry record"\n\n' + _indent(body) + "\n"


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line else "" for line in text.split("\n"))


def anchors_text(entry: Entry) -> str:
    assert entry.meta is not None
    parts = []
    for name, anchor in entry.meta.version_anchors:
        if anchor is not None:
            parts.append(f"{name} {code(anchor.ref)}" + (f" ({code(anchor.commit[:12])})" if anchor.commit else ""))
    return ", ".join(parts)


def cross_refs_text(entry: Entry, library: Library, page: str) -> str:
    assert entry.meta is not None
    parts = []
    for ref in sorted(entry.meta.cross_refs, key=lambda r: (r.relation.value, r.id)):
        target = library.entries.get(ref.id)
        label = target.meta.title if target is not None and target.meta else ref.id
        link = f"[{cell(label)}]({rel(page, entry_page(ref.id))})" if target is not None else code(ref.id)
        note = f" ({cell(ref.note)})" if ref.note else ""
        parts.append(f"*{ref.relation.value}* {link}{note}")
    return "<br>".join(parts)


def readsets_markdown(entry: Entry, library: Library) -> str:
    """Every readset as a table: each file linked at the pinned commit, with the lines read and its evidence."""
    from .validate import file_evidence, readset_evidence

    assert entry.meta is not None
    if not entry.meta.readsets:
        return "## Readsets\n\nNo readset yet: this entry cites no pinned upstream file.\n"
    parts = ["## Readsets\n"]
    for readset in entry.meta.readsets:
        tag = f" · tag {code(readset.tag)}" if readset.tag else ""
        tree = f"https://github.com/{readset.repo}/tree/{readset.commit}"
        evidence = readset_evidence(library.manifests, readset)
        parts.append(f"**{cell(readset.repo)}** at [{code(readset.commit)}]({tree}){tag} · {evidence}\n")
        rows = [
            [
                f"[{code(f.path)}]({github_url(readset.repo, readset.commit, f.path)})",
                code(f.blob[:12]),
                cell(f.lines),
                cell(f.scope),
                file_evidence(library.manifests, readset, f.path, f.blob),
            ]
            for f in readset.files
        ]
        parts.append(table(["File", "Blob", "Lines read", "Scope", "Evidence"], rows))
    return "\n".join(parts)


def reference_markdown(entry: Entry, name: str, warn: Warn) -> str:
    assert entry.meta is not None
    doc = entry.references[name]
    # On the site an entry's SKILL.md is its index page: links from a reference to it follow that.
    text = link_citations(doc.text.replace("](../SKILL.md", "](../index.md"), entry.meta.readsets, warn, doc.file)
    page = reference_page(entry.id, name)
    back = f"Reference of [{cell(entry.meta.title)}]({rel(page, entry_page(entry.id))}) · {code(doc.file)}\n"
    title, rest = _split_title(text, name.removesuffix(".md"))
    return f"# {title}\n\n{back}\n{rest.strip()}\n"


# ----------------------------------------------------------------------------------- overview pages


def tier_table(library: Library, page: str = "tiers.md") -> str:
    """Entries by tier and canonical owner, with status and validation."""
    rows = []
    for entry in sorted(_entries(library), key=lambda e: (e.meta.tier, e.meta.owner, e.id)):
        meta = entry.meta
        rows.append(
            [
                str(meta.tier),
                code(meta.owner),
                f"[{cell(meta.title)}]({rel(page, entry_page(entry.id))})",
                cell(meta.title_zh),
                code(meta.status.state.value),
                code(meta.empirical_validation.state.value),
            ]
        )
    return table(["Tier", "Owner", "Entry", "中文", "Status", "Validation"], rows)


def versions_markdown(library: Library) -> str:
    """Entries × version anchors; a commit links to GitHub when a readset of the entry pins it."""
    page = "versions.md"
    rows = []
    for entry in _entries(library):
        row = [f"[{cell(entry.meta.title)}]({rel(page, entry_page(entry.id))})", str(entry.meta.tier)]
        for name in ANCHOR_NAMES:
            anchor = getattr(entry.meta.version_anchors, name)
            row.append(_anchor_cell(entry, anchor) if anchor is not None else "—")
        rows.append(row)
    intro = (
        "# Version anchors\n\nThe versions each entry was written and checked against, generated from every "
        "`entry.yaml` at build time. A dash means the entry does not depend on that component.\n\n"
    )
    return NO_SEARCH + intro + table(["Entry", "Tier", *ANCHOR_NAMES], rows)


def _anchor_cell(entry: Entry, anchor) -> str:
    text = code(anchor.ref)
    if anchor.commit:
        repos = [r.repo for r in entry.meta.readsets if r.commit == anchor.commit]
        short = code(anchor.commit[:12])
        text += " " + (f"[{short}](https://github.com/{repos[0]}/tree/{anchor.commit})" if repos else short)
    return text


def topics(library: Library) -> dict[str, list[Entry]]:
    found: dict[str, list[Entry]] = {}
    for entry in _entries(library):
        for topic in entry.meta.topics:
            found.setdefault(topic, []).append(entry)
    return dict(sorted(found.items()))


def topic_markdown(topic: str, entries: list[Entry]) -> str:
    page = topic_page(topic)
    rows = [
        [f"[{cell(e.meta.title)}]({rel(page, entry_page(e.id))})", cell(e.meta.title_zh), str(e.meta.tier)]
        for e in entries
    ]
    return NO_SEARCH + f"# Topic: {cell(topic)}\n\n" + table(["Entry", "中文", "Tier"], rows)


def topics_index(found: dict[str, list[Entry]]) -> str:
    page = "topics/index.md"
    rows = [[f"[{cell(t)}]({rel(page, topic_page(t))})", str(len(entries))] for t, entries in found.items()]
    return (
        NO_SEARCH
        + "# Topics\n\nEntries grouped by the `topics` of their `entry.yaml`.\n\n"
        + table(["Topic", "Entries"], rows)
    )


def placeholder_markdown(name: str) -> str:
    title, command = EXTERNAL_PAGES[name]
    return (
        NO_SEARCH + f'# {title}\n\n!!! warning "Not generated yet"\n\n'
        f"    `docs/{name}` does not exist in this checkout. Run `{command}` to write it, then rebuild.\n"
    )


def _entries(library: Library) -> list[Entry]:
    return [e for e in library.sorted_entries() if e.meta is not None and e.body is not None]


# -------------------------------------------------------------------------------------- eval reports

DASHBOARD_METRICS = ("hit@1", "hit@3", "mrr@10", "ndcg@10", "recall@5", "negative_intrusion", "oos_abstention")
TABLE_METRICS = (*DASHBOARD_METRICS, "false_abstention", "latency_p50_ms", "latency_p95_ms", "cases")


def load_reports(results: Path, warn: Warn) -> list[dict]:
    """The committed ``report-<retriever>.json`` files, sorted by retriever; unreadable ones are reported."""
    reports = []
    for path in sorted(results.glob("report-*.json")) if results.is_dir() else []:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(report.get("metrics"), dict) or not isinstance(report.get("cases", []), list):
                raise ValueError("no 'metrics' object or 'cases' list")
        except (OSError, ValueError, AttributeError) as exc:
            warn(f"{path}: not a skillkb eval report ({exc}); regenerate it with `skillkb eval --out`")
            continue
        report.setdefault("retriever", path.stem.removeprefix("report-"))
        reports.append(report)
    return sorted(reports, key=lambda r: str(r["retriever"]))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() and value > 1 else f"{value:.3f}"
    return cell(value)


def entry_hit_rates(report: dict) -> dict[str, tuple[int, int]]:
    """entry id -> (cases answered first, in-scope cases expecting it)."""
    rates: dict[str, tuple[int, int]] = {}
    for case in report.get("cases", []):
        for entry_id in case.get("expected", []):
            hits, total = rates.get(entry_id, (0, 0))
            rates[entry_id] = (hits + (case.get("hit_rank") == 1), total + 1)
    return dict(sorted(rates.items()))


def dashboard_markdown(
    reports: list[dict], library: Library, results: str, real: list[dict] | None = None, real_results: str = ""
) -> str:
    """The evaluation page: authored and real side by side (test split), then the authored set in detail."""
    page = "evals/index.md"
    head = (
        "# Retrieval evaluation\n\nGenerated at build time from the committed reports "
        f"`{results}/report-<retriever>.json` (written by `skillkb eval --retriever NAME --out {results}`)"
        + (f" and `{real_results}/report-<retriever>.json` (`skillkb eval --set real`)" if real else "")
        + ".\n\n"
    )
    if not reports and not real:
        return NO_SEARCH + head + '!!! warning "No reports"\n\n    No eval report is committed yet.\n'
    parts = [head]
    if real:
        parts += [
            "## Authored and real questions, side by side\n",
            "Authored cases were written for the entries; real ones are users' questions copied from public "
            "threads ([details](real.md)). Test split only: nothing was tuned on it. (The combined ranker's "
            "query classifier was trained on the dev questions, so figures over all cases are partly "
            "in-sample.)\n",
            _side_by_side(reports, real),
            *_fresh(real),
            *_agent_reader(library.root / AGENT_READER_SUMMARY),
            *_ceiling(library.root / CEILING_SUMMARY),
            *_label_agreement(library.root / LABEL_AGREEMENT_SUMMARY),
        ]
    parts += ["# Authored cases\n" if real else "", *_set_sections(reports, library, page, "")]
    return NO_SEARCH + "\n".join(parts)


def real_dashboard_markdown(reports: list[dict], library: Library, results: str) -> str:
    page = "evals/real.md"
    head = (
        "# Real users' questions\n\nQuestions copied from public GitHub threads, labelled by the root cause "
        f"the thread shows (`evals/retrieval/real/`); reports `{results}/report-<retriever>.json`.\n\n"
    )
    if not reports:
        return NO_SEARCH + head + '!!! warning "No reports"\n\n    No real-question report is committed yet.\n'
    return NO_SEARCH + head + "\n".join(_set_sections(reports, library, page, "real-", confusion=True))


SIDE_METRICS = ("hit@1", "hit@3_any", "mrr@10", "oos_abstention", "false_abstention")


def _side_by_side(authored: list[dict], real: list[dict]) -> str:
    by_name = {str(r["retriever"]): r for r in authored}
    rows = []
    for report in real:
        name = str(report["retriever"])
        mine = report.get("by_split", {}).get("test", {})
        theirs = by_name.get(name, {}).get("by_split", {}).get("test", {})
        rows.append([code(name), *(f"{_fmt(theirs.get(m, '—'))} / {_fmt(mine.get(m, '—'))}" for m in SIDE_METRICS)])
    return table(["Retriever (authored / real)", *SIDE_METRICS], rows)


def _fresh(real: list[dict]) -> list[str]:
    """Real test questions of the newest collection round (tag ``roundN``), when the reports have them: they
    were added after every earlier choice was made, and nothing was tuned on them."""
    tag = newest_round({t for r in real for t in r.get("test_by_tag", {})})
    if tag is None:
        return []
    rows = [
        [code(r["retriever"]), *(_fmt(r["test_by_tag"][tag].get(m, "—")) for m in SIDE_METRICS)]
        for r in real
        if tag in r.get("test_by_tag", {})
    ]
    number = tag.removeprefix("round")
    intro = (
        f"Fresh real questions only (round {number}, test split): added after every earlier choice was made, "
        "and nothing was tuned on them.\n"
    )
    return [intro, table(["Retriever", *SIDE_METRICS], rows)]


CEILING_SUMMARY = Path("evals/retrieval/real/ceiling/summary.json")  # written by bench/bench_ceiling.py
CEILING_METRICS = ("hit@1", "hit@3_any", "oos_abstention", "false_abstention")
CEILING_ROUTERS = (
    ("judges", "judges"),
    ("search", "search, cross-fitted"),
    ("reader_in_loop", "search, then a judge reads its hits"),
)


def _read_summary(path: Path) -> dict:
    """A summary a benchmark recorded: a regular file, never followed through a link."""
    text, problem = read_text(path, 1_048_576)
    if problem or text is None:
        raise ValueError(problem.message if problem else "unreadable")
    return json.loads(text)


def _router_rows(
    summary: dict, lead: tuple[str, ...], routers: tuple[tuple[str, str], ...], metrics: tuple[str, ...]
) -> list[list[str]]:
    """One table row per summary row and router: the row's ``lead`` fields, its sizes, the router, its
    metrics. A router beyond the first two that a row lacks is left out (an older summary's shape)."""
    return [
        [*(cell(row[name]) for name in lead), f"{row['in_scope']} / {row['uncovered']}", cell(router)]
        + [_fmt(row[key].get(m)) if row[key].get(m) is not None else "—" for m in metrics]
        for row in summary["rows"]
        for i, (key, router) in enumerate(routers)
        if i < 2 or key in row  # a summary recorded before round 8 has no third router
    ]


SUMMARY_ERRORS = (OSError, ValueError, KeyError, TypeError, AttributeError)


def _unreadable(title: str, shown: Path, exc: Exception) -> list[str]:
    return [f'!!! warning "{title} unreadable"\n\n    {cell(shown.as_posix())}: {cell(exc)}\n']


def _ceiling(path: Path) -> list[str]:
    """What the question text supports: independent judges beside the search on real dev (when recorded)."""
    if not path.exists():
        return []
    try:
        rows = _router_rows(_read_summary(path), ("questions",), CEILING_ROUTERS, CEILING_METRICS)
    except SUMMARY_ERRORS as exc:
        return _unreadable("Ceiling summary", CEILING_SUMMARY, exc)
    intro = (
        "## What the question text supports (real dev)\n\n"
        "Independent judges saw each real dev question exactly as the search does, a catalogue of the entries "
        "and the labelling rules, and nothing else; they named the entry that answers its root cause or "
        "none. The search beside them is cross-fitted (each question scored by a query classifier that never "
        "saw it); the third router is the two together, as the MCP tool asks an agent to work: the search, "
        "then the judge's answer acted on when the search returned that entry. Here hit@3_any counts the "
        "entries offered when abstaining (the judges' three, the search's "
        "`related`), so both routers are measured alike; the reports above count an abstention as an empty "
        "ranking. Recorded by `bench/bench_ceiling.py`; `bench/RESULTS.md` has the analysis.\n"
    )
    return [intro, table(["Questions", "In scope / uncovered", "Router", *CEILING_METRICS], rows)]


AGENT_READER_SUMMARY = Path("evals/retrieval/real/ceiling/agent-reader-summary.json")  # bench/bench_agent_reader.py
AGENT_READER_METRICS = ("hit@1", "uncovered_declined", "in_scope_declined")


def _agent_reader(path: Path) -> list[str]:
    """The search as an agent uses it: alone, and with a reader choosing among its hits (when recorded)."""
    if not path.exists():
        return []
    routers = (("search", "search"), ("reader", "search, then the agent reads its hits"))
    try:
        rows = _router_rows(_read_summary(path), ("split", "questions"), routers, AGENT_READER_METRICS)
    except SUMMARY_ERRORS as exc:
        return _unreadable("Agent-reader summary", AGENT_READER_SUMMARY, exc)
    intro = (
        "## The search as an agent uses it (real dev and test)\n\n"
        "Each hit carries its entry's description and not_for, and the MCP tool asks the agent to act on the "
        "hit that answers the root cause, or on none. Language-model readers stood in for the agent: each saw "
        "a question, what the search returned for it (the hits in order with their headings, snippets and "
        "scores, each entry's description and not_for) and the tool's description, nothing else (no labels, no "
        "thread). Dev questions were searched cross-fitted. A declined in-scope question counts as a miss. "
        "Recorded by `bench/bench_agent_reader.py`; `bench/RESULTS.md` (rounds 8 and 9) has the analysis.\n"
    )
    columns = ["Split", "Questions", "In scope / uncovered", "Router", *AGENT_READER_METRICS]
    return [intro, table(columns, rows)]


LABEL_AGREEMENT_SUMMARY = Path("evals/retrieval/real/ceiling/label-agreement-summary.json")  # bench_label_agreement


def _label_agreement(path: Path) -> list[str]:
    """How far a second, blind labeller of the same threads agrees with the set's labels (when recorded)."""
    if not path.exists():
        return []
    try:
        summary = _read_summary(path)
        rows = [
            [cell(row["split"]), cell(row["questions"]), _fmt(row["n"])]
            + [_fmt(row[k]) if row[k] is not None else "—" for k in ("exact", "lenient")]
            for row in summary["rows"]
        ]
        kappas = ", ".join(f"{cell(split)} {_fmt(float(value))}" for split, value in summary["kappa"].items())
        adjudication = _adjudication(summary["adjudication"]) if "adjudication" in summary else []
    except SUMMARY_ERRORS as exc:
        return _unreadable("Label-agreement summary", LABEL_AGREEMENT_SUMMARY, exc)
    intro = (
        "## How far two labellers of the same thread agree (real questions, samples)\n\n"
        "Every figure above scores a router against one labeller's reading of each thread. A second labeller, "
        "blind to the first, found and read the threads of seeded samples of real questions under the same "
        "rules and named the entry that answers the root cause, or none. Exact: the second label is an expected "
        "entry (or both are none), the agreement Hit@1 asks of a router; lenient: it is expected or acceptable, "
        "or an expected entry is among those it says would also help. Cohen's kappa over the primary labels: "
        f"{kappas}. Recorded by `bench/bench_label_agreement.py`; `bench/RESULTS.md` (round 10) has the analysis.\n"
    )
    return [intro, table(["Split", "Questions", "n", "exact agreement", "lenient agreement"], rows), *adjudication]


ADJUDICATION_SIDES = ("with the set", "with the second", "neither", "thread not found")
ADJUDICATION_FIGURES = ("hit@1", "uncovered_declined", "in_scope_declined", "right_outcomes")


def _adjudication(summary: dict) -> list[str]:
    """Where a third blind labeller sided on the disputed questions, and the routers against both references."""
    sides = [
        [cell(row["split"]), _fmt(row["disputed"]), *(_fmt(row[side]) for side in ADJUDICATION_SIDES)]
        for row in summary["sides"]
    ]
    routers = [
        [cell(row["split"]), cell(row["router"]), cell(row["reference"]), _fmt(row["questions"])]
        + [_fmt(row[k]) if row[k] is not None else "—" for k in ADJUDICATION_FIGURES]
        for row in summary["routers"]
    ]
    intro = (
        "A third labeller, with the same brief and blind to both labels, read the threads of the questions the "
        "first two disagree on. Where the third sides with one of them, that label is the majority of three; "
        "where all three differ the question is left out of the second table. The second table scores the "
        "search alone and the search followed by a reader of its whole response (the round-9 run) on the same "
        "sampled questions against the set's labels and against the majority. The set's labels were not "
        "changed. Recorded by `bench/bench_label_agreement.py --disagreements`; `bench/RESULTS.md` (round 11) "
        "has the analysis.\n"
    )
    return [
        intro,
        table(["Split", "Disputed", *(f"third sides {side}" for side in ADJUDICATION_SIDES)], sides),
        table(["Split", "Router", "Reference", "Questions", *ADJUDICATION_FIGURES], routers),
    ]


def _set_sections(reports: list[dict], library: Library, page: str, prefix: str, confusion: bool = False) -> list[str]:
    if not reports:
        return ["No report for this set.\n"]
    names = [str(r["retriever"]) for r in reports]
    parts = ["## Latest metrics\n", f"![Metrics by retriever]({prefix}metrics.svg)\n"]
    parts.append(
        table(
            ["Retriever", "k", *TABLE_METRICS],
            [
                [code(r["retriever"]), _fmt(r.get("k", "")), *(_fmt(r["metrics"].get(m, "—")) for m in TABLE_METRICS)]
                for r in reports
            ],
        )
    )
    parts += ["## By language\n", f"![hit@1 by language]({prefix}languages.svg)\n", _by_group(reports, "by_lang")]
    parts += ["## By split\n", _by_group(reports, "by_split")]
    parts += [
        "## Per-entry hit@1\n",
        f"![hit@1 per entry]({prefix}entries.svg)\n",
        _entry_table(reports, library, page),
    ]
    if confusion:
        parts.append("## Confusion: expected entry → first hit\n")
        for report in reports:
            parts.append(_confusion(report))
    parts.append("## Failing cases\n")
    for report in reports:
        parts.append(_failing(report))
    parts.append(f"\nRetrievers: {', '.join(cell(n) for n in names)}.\n")
    return parts


def _confusion(report: dict) -> str:
    table_ = report.get("confusion") or {}
    rows = []
    for expected, row in table_.items():
        total = sum(row.values())
        right = row.get(expected, 0)
        wrong = sorted(((n, got) for got, n in row.items() if got != expected), reverse=True)[:4]
        rows.append(
            [
                code(expected.rsplit("/", 1)[-1]),
                f"{right}/{total}",
                ", ".join(f"{code(got.rsplit('/', 1)[-1])} {n}" for n, got in wrong) or "—",
            ]
        )
    name = cell(report["retriever"]).replace('"', "'")
    title = f'??? abstract "{name}: where each expected entry\'s questions went"'
    return title + "\n\n" + _indent(table(["Expected", "First hit right", "Went instead to (count)"], rows)) + "\n"


def _by_group(reports: list[dict], key: str) -> str:
    cols = ("hit@1", "mrr@10", "ndcg@10", "oos_abstention", "false_abstention", "cases")
    rows = [
        [code(r["retriever"]), cell(group), *(_fmt(m.get(c, "—")) for c in cols)]
        for r in reports
        for group, m in sorted(r.get(key, {}).items())
    ]
    return table(["Retriever", key.removeprefix("by_"), *cols], rows)


def _entry_table(reports: list[dict], library: Library, page: str) -> str:
    rates = [entry_hit_rates(r) for r in reports]
    ids = sorted({i for rate in rates for i in rate})
    rows = []
    for entry_id in ids:
        label = (
            f"[{code(entry_id)}]({rel(page, entry_page(entry_id))})" if entry_id in library.entries else code(entry_id)
        )
        cells = [f"{h}/{t} ({h / t:.0%})" if t else "—" for h, t in (rate.get(entry_id, (0, 0)) for rate in rates)]
        rows.append([label, *cells])
    return table(["Entry", *(code(r["retriever"]) for r in reports)], rows)


def _failing(report: dict) -> str:
    failing = [c for c in report.get("cases", []) if not c.get("passed")]
    rows = [
        [
            code(c.get("id", "")),
            cell(c.get("lang", "")),
            cell(c.get("split", "")),
            cell(c.get("query", "")),
            "<br>".join(code(e) for e in c.get("expected", [])) or "(out of scope)",
            "abstained" if c.get("abstained") else "<br>".join(code(x) for x in c.get("ranked", [])[:3]),
        ]
        for c in failing
    ]
    name = cell(report["retriever"]).replace('"', "'")
    title = f'??? failure "{name}: {len(failing)} failing case(s) of {len(report.get("cases", []))}"'
    if not rows:
        return title + "\n\n    None.\n"
    return title + "\n\n" + _indent(table(["Case", "Lang", "Split", "Query", "Expected", "Got (top 3)"], rows)) + "\n"


def render_charts(reports: list[dict], prefix: str = "") -> dict[str, bytes]:
    """SVG charts, drawn deterministically with matplotlib's Agg backend (fixed hash salt, no date)."""
    if not reports:
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = {"svg.hashsalt": "skillkb-site", "svg.fonttype": "path", "font.family": "DejaVu Sans", "font.size": 9}
    names = [str(r["retriever"]) for r in reports]
    with plt.rc_context(style):
        charts = {
            f"evals/{prefix}metrics.svg": _bars(
                plt,
                names,
                list(DASHBOARD_METRICS),
                [[r["metrics"].get(m, 0.0) for m in DASHBOARD_METRICS] for r in reports],
                "Metrics by retriever",
            ),
        }
        langs = sorted({lang for r in reports for lang in r.get("by_lang", {})})
        charts[f"evals/{prefix}languages.svg"] = _bars(
            plt,
            names,
            langs,
            [[r.get("by_lang", {}).get(g, {}).get("hit@1", 0.0) for g in langs] for r in reports],
            "hit@1 by language",
        )
        rates = [entry_hit_rates(r) for r in reports]
        ids = sorted({i for rate in rates for i in rate})
        values = [[(h / t if t else 0.0) for h, t in (rate.get(i, (0, 0)) for i in ids)] for rate in rates]
        charts[f"evals/{prefix}entries.svg"] = _bars(
            plt, names, [i.rsplit("/", 1)[-1] for i in ids], values, "hit@1 per expected entry", horizontal=True
        )
    return charts


def _bars(
    plt, series: list[str], groups: list[str], values: list[list[float]], title: str, horizontal: bool = False
) -> bytes:
    count = max(len(series), 1)
    width = 0.8 / count
    size = (7.5, 0.32 * len(groups) * max(count, 2) / 2 + 1.5) if horizontal else (7.5, 3.4)
    fig, ax = plt.subplots(figsize=size)
    for i, (name, row) in enumerate(zip(series, values, strict=True)):
        offsets = [g + (i - (count - 1) / 2) * width for g in range(len(groups))]
        (ax.barh if horizontal else ax.bar)(offsets, row, width, label=name)
    ticks = range(len(groups))
    if horizontal:
        ax.set_yticks(list(ticks), groups)
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
    else:
        ax.set_xticks(list(ticks), groups, rotation=20, ha="right")
        ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)  # never over a bar
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue().encode("utf-8")


# --------------------------------------------------------------------------------------- everything


def generate(
    library: Library, results: Path | None = None, warn: Warn | None = None, docs_present: set[str] | None = None
) -> SitePages:
    """All generated pages, assets and the navigation for one build."""
    warn = warn or (lambda message: None)
    records = {r.id: r for r in _index(library).entries}
    out = SitePages()
    tiers: dict[int, list] = {1: [], 2: [], 3: []}
    for entry in _entries(library):
        out.pages[entry_page(entry.id)] = entry_markdown(entry, library, records[entry.id], warn)
        item: list | str = entry_page(entry.id)
        if entry.references:
            refs = [
                {html_text(name.removesuffix(".md")): reference_page(entry.id, name)}
                for name in sorted(entry.references)
            ]
            for name in sorted(entry.references):
                out.pages[reference_page(entry.id, name)] = reference_markdown(entry, name, warn)
            item = [entry_page(entry.id), *refs]
        tiers[entry.meta.tier].append({html_text(entry.meta.title): item})
    found = topics(library)
    out.pages["topics/index.md"] = topics_index(found)
    for topic, entries in found.items():
        out.pages[topic_page(topic)] = topic_markdown(topic, entries)
    out.pages["versions.md"] = versions_markdown(library)
    results = results or library.root / RESULTS_DIR
    reports = load_reports(results, warn)
    real_dir = library.root / REAL_RESULTS_DIR
    real = load_reports(real_dir, warn)

    def shown(path: Path) -> str:
        return path.relative_to(library.root).as_posix() if path.is_relative_to(library.root) else str(path)

    out.pages["evals/index.md"] = dashboard_markdown(reports, library, shown(results), real, shown(real_dir))
    out.assets.update(render_charts(reports))
    if real:
        out.pages["evals/real.md"] = real_dashboard_markdown(real, library, shown(real_dir))
        out.assets.update(render_charts(real, "real-"))
    present = docs_present if docs_present is not None else set()
    if "index.md" not in present:
        out.pages["index.md"] = f"# {cell(library.root.name)}\n\nSkills of this library, by tier:\n\n" + tier_table(
            library, "index.md"
        )
    for name in EXTERNAL_PAGES:
        if name not in present:
            out.pages[name] = placeholder_markdown(name)
    out.tier_table = tier_table(library)
    out.nav = _nav(tiers, found, present, "evals/real.md" in out.pages)
    return out


def _index(library: Library):
    from .index import build_index

    return build_index(library)


def _nav(tiers: dict[int, list], found: dict[str, list[Entry]], present: set[str], real: bool = False) -> list:
    """Home, tiers, skills by tier, topics, coverage, drift, versions, evaluation, authoring.

    Hand-written pages other than the home page appear only when ``docs/`` has them.
    """

    def hand(title: str, name: str) -> list[dict]:
        return [{title: name}] if name in present else []

    return [
        {"Home": "index.md"},
        *hand("Tiers and ownership", "tiers.md"),
        {"Skills": [{TIER_TITLES[t]: items} for t, items in tiers.items() if items]},
        {"Topics": ["topics/index.md", *({html_text(t): topic_page(t)} for t in found)]},
        {"Coverage": [{EXTERNAL_PAGES[n][0]: n} for n in ("reference-matrix.md", "skill-coverage.md", "ownership.md")]},
        {"Upstream drift": "upstream-drift.md"},
        {"Version anchors": "versions.md"},
        {"Evaluation": ["evals/index.md", {"Real users' questions": "evals/real.md"}] if real else "evals/index.md"},
        *hand("Authoring an entry", "authoring.md"),
        *hand("Security and guarantees", "security.md"),
    ]


# -------------------------------------------------------------------------------------------- build


def _config(root: Path, site_dir: Path | None, strict: bool, results: Path | None, **extra):
    import os

    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    from mkdocs.config import load_config

    config_file = root / "mkdocs.yml"
    if not config_file.is_file():
        from .api import UsageError

        raise UsageError(f"no mkdocs.yml at {root}; the site is configured there")
    overrides = {"site_dir": str(site_dir)} if site_dir else {}
    config = load_config(str(config_file), strict=strict, **overrides, **extra)
    if results is not None:
        config.extra["skillkb_eval_results"] = str(results.resolve())
    return config


SITE_MARKER = ".skillkb-site"  # left in a site folder the build wrote; mkdocs keeps dotfiles when cleaning
# Folders of the library a site build must never empty (mkdocs clears its site folder before writing).
PROTECTED = (".git", "docs", "hardware", "repositories", "tools", "schemas", "sources", "evals", "tests", "bench")


def check_site_dir(root: Path, site_dir: Path, force: bool = False) -> None:
    """Refuse a site folder the build would wrongly empty: a file, the library, a protected folder, or a
    non-empty folder an earlier ``skillkb docs build`` did not write (unless ``force``)."""
    from .api import UsageError

    target, root = site_dir.resolve(), root.resolve()
    if target.exists() and not target.is_dir():
        raise UsageError(f"--site-dir {site_dir} is a file; pass a folder (it is emptied and rewritten)")
    if target == root or root.is_relative_to(target):
        raise UsageError(f"--site-dir {site_dir} holds the library itself; pass a folder such as site/")
    for name in PROTECTED:
        if target.is_relative_to(root / name):
            raise UsageError(f"--site-dir {site_dir} is inside the library's {name}/; pass a folder such as site/")
    if target.is_dir() and any(target.iterdir()) and not (target / SITE_MARKER).is_file() and not force:
        raise UsageError(
            f"--site-dir {site_dir} is not empty and was not written by `skillkb docs build`; the build empties "
            "its folder, so pass a new or empty folder (or --force to let it empty this one)"
        )


def _reproducible_dates(root: Path) -> None:
    """mkdocs stamps the sitemap (and its gzip header) with the build time unless SOURCE_DATE_EPOCH is
    set: default it to the library's last commit time, so two builds of one commit are byte-identical."""
    import os
    import subprocess

    if os.environ.get("SOURCE_DATE_EPOCH"):
        return
    try:
        done = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True)
        stamp = done.stdout.strip() if done.returncode == 0 and done.stdout.strip().isdigit() else "0"
    except OSError:
        stamp = "0"
    os.environ["SOURCE_DATE_EPOCH"] = stamp


def build_site(
    root: Path, site_dir: Path | None = None, strict: bool = False, results: Path | None = None, force: bool = False
) -> Path:
    """Build the site (``mkdocs build``) from the library at ``root``; returns the site folder."""
    from mkdocs.commands.build import build

    _log_to_stderr()
    _reproducible_dates(root)
    logging.getLogger("jieba").setLevel(logging.WARNING)  # its "Building prefix dict" lines on every build
    if site_dir is not None:  # before mkdocs reads its config, which has its own, less clear, refusals
        check_site_dir(root, site_dir, force)
    config = _config(root, site_dir, strict, results)
    check_site_dir(root, Path(config.site_dir), force)
    build(config)
    (Path(config.site_dir) / SITE_MARKER).write_text("written by skillkb docs build\n", encoding="utf-8")
    return Path(config.site_dir)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (it may be swapped after the handler is added)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def _log_to_stderr() -> None:
    """Show mkdocs warnings and errors (broken links, unresolved citations) as the mkdocs CLI would."""
    logger = logging.getLogger("mkdocs")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
        logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)


def serve_site(root: Path, port: int = 8000) -> None:
    """Serve the site with live reload on 127.0.0.1 only."""
    import os

    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    from mkdocs.commands.serve import serve

    _log_to_stderr()
    serve(str(root / "mkdocs.yml"), dev_addr=f"127.0.0.1:{port}")


# ---------------------------------------------------------------------------------------------- CLI


def require_site_extra() -> None:
    """mkdocs, Material, jieba and matplotlib come with the 'site' extra; say so instead of a traceback."""
    from .diagnostics import require

    for module in ("mkdocs", "material", "jieba", "matplotlib"):
        require(module, "site", "`skillkb docs`")


def cmd_docs_build(args: argparse.Namespace) -> int:
    require_site_extra()
    from mkdocs.exceptions import Abort, MkDocsException

    try:
        site_dir = args.site_dir.resolve() if args.site_dir else None
        results = args.eval_results.resolve() if args.eval_results else None
        site = build_site(args.root, site_dir, args.strict, results, force=args.force)
    except (Abort, MkDocsException) as exc:
        print(f"skillkb docs build: {exc}", file=sys.stderr)
        return 1
    print(f"site written to {site}")
    return 0


def cmd_docs_serve(args: argparse.Namespace) -> int:
    require_site_extra()
    from mkdocs.exceptions import Abort, MkDocsException

    if not 1 <= args.port <= 65535:
        from .api import UsageError

        raise UsageError("--port must be between 1 and 65535")
    print(f"serving on http://127.0.0.1:{args.port}/ (Ctrl-C to stop)", file=sys.stderr)
    try:
        serve_site(args.root, args.port)
    except (Abort, MkDocsException) as exc:
        print(f"skillkb docs serve: {exc}", file=sys.stderr)
        return 1
    return 0


def register_cli(subparsers) -> None:
    docs = subparsers.add_parser("docs", help="build or serve the documentation site (mkdocs + Material)")
    dsub = docs.add_subparsers(dest="docs_command", required=True, metavar="ACTION")
    p = dsub.add_parser("build", help="build the site into site/ (or --site-dir)")
    p.add_argument("--strict", action="store_true", help="fail on any mkdocs warning (broken link, bad citation)")
    p.add_argument("--site-dir", type=Path, default=None, help="output folder (default site/)")
    p.add_argument("--eval-results", type=Path, default=None, help=f"eval reports folder (default {RESULTS_DIR})")
    p.add_argument(
        "--force", action="store_true", help="let the build empty a non-empty --site-dir it did not write before"
    )
    p.set_defaults(func=cmd_docs_build)
    p = dsub.add_parser("serve", help="serve the site with live reload on 127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=cmd_docs_serve)
