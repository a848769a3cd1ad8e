"""What the entries' "Not this entry" lists do to the ranking (round 9), cross-fitted on the dev splits.

    .venv/bin/python bench/bench_neighbours.py

Every SKILL.md ends its overview with a "Not this entry" list: which neighbouring entry takes which nearby
question. The index has held that list as one more section of the entry that *disowns* the topics in it, so
"NPU out of memory" in the sleep-mode entry's list is BM25 evidence for sleep mode. Round 8 gave the list to
readers (``not_for``); this measures what it is worth to the ranker itself, four ways:

- **shipped**: the list indexed as a section of the entry that wrote it (as today);
- **list not indexed**: the section left out of the BM25 index;
- **list as routing**: left out, and read as what it is — each piece of a list (split at ``;``) names the
  entry that owns it, so a question that matches a piece is evidence *for* the named entry (signal
  ``claimed``: the best piece naming the entry) and *against* the entry whose list it is (``disowned``:
  minus the best piece of the entry's own list);
- **shipped + routing**: the section kept and the two signals added.

Every question is scored out of fold: its learned signal comes from a classifier fitted without its fold,
and each variant's signal weights are re-fitted per language on the other folds by the shipped coordinate
ascent (``fit_combined(..., extra=...)``). p: paired randomisation against the shipped variant re-fitted the
same way. ``bench/RESULTS.md`` (round 9) has the figures.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from crossfit import cross_fitted_hits, dev_and_held_out, held_out_signals, print_hit1_table  # noqa: E402

from skillkb import evaluation as ev  # noqa: E402
from skillkb import retrieval  # noqa: E402
from skillkb.api import load_or_fail  # noqa: E402
from skillkb.corpus import NOT_THIS_ENTRY, Doc, not_this_entry  # noqa: E402
from skillkb.loader import Library  # noqa: E402
from skillkb.models import EvalCase  # noqa: E402
from skillkb.retrieval import BM25Index, EntrySignals, SearchEngine, clean_query  # noqa: E402
from skillkb.signals import weighted_query  # noqa: E402
from skillkb.tokenize import tokenize  # noqa: E402

ENTRY_ID = re.compile(r"`((?:hardware|repositories)/[a-z0-9/_-]+)`")
ROUTING = ("claimed", "disowned")
VARIANTS = {
    "shipped": (False, ()),
    "list not indexed": (True, ()),
    "list as routing": (True, ROUTING),
    "shipped + routing": (False, ROUTING),
}


@dataclass(frozen=True)
class Piece:
    """One piece of an entry's "Not this entry" list: its text and the entries it sends the reader to."""

    source: str
    owners: tuple[str, ...]
    text: str


def list_pieces(library: Library) -> list[Piece]:
    """Every list item of every entry, split at ``;`` so that a piece names the one neighbour it is about;
    a piece that names none belongs to the item's first named neighbour."""
    pieces = []
    for entry in library.sorted_entries():
        for item in re.split(r"\n(?=- )", not_this_entry(entry)):
            named = ENTRY_ID.findall(item)
            for part in item.split(";"):
                owners = tuple(dict.fromkeys(ENTRY_ID.findall(part))) or tuple(named[:1])
                text = ENTRY_ID.sub(" ", part).strip(" -\n")
                if owners and text:
                    pieces.append(Piece(entry.id, owners, text))
    return pieces


class Routing:
    """BM25 over the list pieces; per question, per entry: the best piece naming it and the best of its own."""

    def __init__(self, pieces: list[Piece]):
        self.pieces = pieces
        self.bm25 = BM25Index.build([tokenize(p.text) for p in pieces])

    def signals(self, query: str, lexicon) -> dict[str, dict[str, float]]:
        wq = weighted_query(clean_query(query), lexicon)
        scores = self.bm25.scores(wq.tokens, wq.weights)
        out: dict[str, dict[str, float]] = {}
        for piece, score in zip(self.pieces, scores, strict=True):
            for owner in piece.owners:
                slot = out.setdefault(owner, {"claimed": 0.0, "disowned": 0.0})
                slot["claimed"] = max(slot["claimed"], float(score))
            slot = out.setdefault(piece.source, {"claimed": 0.0, "disowned": 0.0})
            slot["disowned"] = min(slot["disowned"], -float(score))
        return out


def engine_without_lists(library: Library) -> SearchEngine:
    """The engine with no "Not this entry" section in its index (built in memory, the cache untouched)."""
    shipped_build = retrieval.build_corpus

    def build(lib: Library, weights) -> list[Doc]:
        return [d for d in shipped_build(lib, weights) if not is_list_section(d)]

    retrieval.build_corpus = build
    try:
        return SearchEngine.open(ROOT, library=library, use_cache=False)
    finally:
        retrieval.build_corpus = shipped_build


def is_list_section(doc: Doc) -> bool:
    return doc.kind == "section" and doc.heading.strip().lower() == NOT_THIS_ENTRY


def variant_signals(
    engine: SearchEngine, dev: list[EvalCase], held_out: ev.HeldOut, routing: Routing, extra: tuple[str, ...]
) -> dict[str, list[EntrySignals]]:
    """Each dev question's signals under the classifier without its fold, with the routing signals asked for."""
    out = {}
    for query, (signals, _) in held_out_signals(engine, dev, held_out).items():
        routed = routing.signals(query, engine.lexicon) if extra else {}
        out[query] = [
            EntrySignals(s.entry_id, s.best_doc, s.values | {n: routed.get(s.entry_id, {}).get(n, 0.0) for n in extra})
            for s in signals
        ]
    return out


def main() -> None:
    library = load_or_fail(ROOT)
    engines = {False: SearchEngine.open(ROOT, library=library, use_cache=False), True: engine_without_lists(library)}
    print(f"documents: {len(engines[False].docs)} shipped, {len(engines[True].docs)} without the lists")
    pieces = list_pieces(library)
    print(f"list pieces: {len(pieces)} from {len({p.source for p in pieces})} entries")
    routing = Routing(pieces)
    dev, held_out = dev_and_held_out(engines[False])
    hits = {}
    for name, (drop, extra) in VARIANTS.items():
        print(f"{name}:", flush=True)
        engine = engines[drop]
        hits[name] = cross_fitted_hits(engine, dev, variant_signals(engine, dev, held_out, routing, extra), extra)
    report(dev, hits)


def report(dev: list[EvalCase], hits: dict[str, dict[str, float]]) -> None:
    print("\nIn-scope dev questions, Hit@1, every question out of fold (p: against shipped)\n")
    print_hit1_table(dev, hits, list(VARIANTS))


if __name__ == "__main__":
    main()
