"""What the benchmarks that hand questions to language-model readers share (bench_agent_reader,
bench_label_agreement): their materials / score / report command line, and how a recorded reader row reads."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path


def parse_command(doc: str, batches: int, add_options: Callable[[argparse.ArgumentParser], None]) -> argparse.Namespace:
    """``materials DIR`` writes what the readers get, ``score DIR... --record FILE`` joins their answers into
    a record (never a default path: a recorded run is not overwritten by accident), ``report FILE`` prints a
    record's figures. ``add_options`` adds the script's own materials options."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("command", choices=("materials", "score", "report"))
    parser.add_argument(
        "path", type=Path, nargs="+", help="materials: a folder; score: the run's folders; report: a record"
    )
    parser.add_argument("--batches", type=int, default=batches, help="materials: how many batches (readers)")
    parser.add_argument("--record", type=Path, help="score: where the answers are recorded (required)")
    add_options(parser)
    args = parser.parse_args()
    if args.command == "score" and args.record is None:
        parser.error("score needs --record FILE: where this run's answers are recorded")
    if args.command != "score" and len(args.path) > 1:
        parser.error(f"{args.command} takes one path")
    if args.command == "materials" and args.batches < 1:
        parser.error(f"--batches must be at least 1 (got {args.batches})")
    return args


def acted_on(row: dict) -> tuple[str | None, list[str]]:
    """A recorded reader row: the entry the reader acted on (None: it declined, or chose nothing offered)
    and what the search offered, in order."""
    offered = row["search"].get("results") or row["search"].get("related") or []
    return (row["choice"] if row["choice"] in offered else None), offered


def first_hit(row: dict) -> str | None:
    """A recorded reader row: the search's own first hit (None when it abstained or returned nothing)."""
    results = [] if row["search"]["abstained"] else row["search"].get("results") or []
    return results[0] if results else None


def jsonl(path: Path) -> list[dict]:
    """The rows of a JSON-lines record (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
