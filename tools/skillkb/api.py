"""The library API behind the CLI; tests and other tools call these functions directly."""

from __future__ import annotations

import json
from pathlib import Path

from .diagnostics import Diagnostic, GitError, SkillkbError, UsageError, errors_only, sort_key
from .fsutil import atomic_write
from .index import build_index, index_drift, write_index
from .loader import Library, load_cases, load_library
from .manifests import MANIFEST_DIR
from .models import EvalCase
from .readsets import (
    snapshot,
    snapshot_artifact,
    verify_against_artifact,
    verify_against_clone,
    verify_against_manifests,
)
from .retrieval import DEFAULT_RETRIEVER, RETRIEVERS, engine_for, search
from .schemas import stale_schemas, write_schemas
from .validate import missing_gates, validate


def load_or_fail(root: Path) -> Library:
    """Load the library, raising ``SkillkbError`` if it has load-level errors (so nothing is built from it)."""
    library, problems = load_library(root)
    errors = errors_only(problems)
    if errors:
        raise SkillkbError(sorted(errors, key=sort_key))
    return library


def verify_readsets(root: Path, clones: dict[str, Path], artifacts: dict[str, Path] | None = None) -> list[Diagnostic]:
    for repo, clone in sorted(clones.items()):
        if not clone.is_dir():
            raise UsageError(f"--clone {repo}={clone}: no such directory (pass a git clone of {repo})")
    for repo, artifact in sorted((artifacts or {}).items()):
        if not artifact.is_file():
            raise UsageError(f"--artifact {repo}={artifact}: no such file (pass the downloaded sdist)")
    library = load_or_fail(root)
    out = verify_against_manifests(library)
    for repo, clone in sorted(clones.items()):
        out += verify_against_clone(library, repo, clone)
    for repo, artifact in sorted((artifacts or {}).items()):
        out += verify_against_artifact(library, repo, artifact)
    return sorted(out, key=sort_key)


# The retrieval engine is cached per process in skillkb.retrieval; ``_engine`` is kept for callers.
_engine = engine_for


def load_cases_or_fail(root: Path, cases_file: Path) -> list[EvalCase]:
    path = cases_file if cases_file.is_absolute() else root / cases_file
    if not path.exists():
        raise UsageError(f"no cases file at {path}")
    cases, problems = load_cases(path, str(cases_file))
    if problems:
        raise SkillkbError(problems)
    if not cases:
        raise UsageError(f"{cases_file} holds no cases")
    return cases


def evaluate(
    root: Path,
    cases: Path = Path("evals/retrieval/cases.jsonl"),
    retriever: str = DEFAULT_RETRIEVER,
    k: int = 10,
    split: str = "all",
    out: Path | None = None,
    gate: Path | None = None,
    write_baseline: Path | None = None,
    calibrate: bool = False,
    compare: str | None = None,
) -> dict:
    """Run the retrieval eval; optionally calibrate, export, compare, gate and record a baseline."""
    from . import evaluation as ev

    all_cases = load_cases_or_fail(root, cases)
    engine = engine_for(root)
    notes: list[str] = []
    if calibrate:
        models = dict(engine.calibration.models)
        stats = {}
        for name in sorted({retriever, *RETRIEVERS}):
            models[name], stats[name] = ev.calibrate(engine, all_cases, name)
            notes.append(f"calibrated {name}: {models[name].to_json()} {stats[name]}")
        ev.write_calibration(root, models, stats)
        engine.calibration.models.update(models)
    selected = all_cases if split == "all" else [c for c in all_cases if c.split == split]
    run = ev.run_eval(engine, selected, retriever, k)
    report = run.report()
    result: dict = {"report": report, "notes": notes}
    if compare:
        other = ev.run_eval(engine, selected, compare, k)
        report["comparison"] = ev.compare_runs(run, other)
        notes.append(f"paired randomisation {report['comparison']}")
    if out:
        ev.write_report(run, out)
        ev.export_beir(engine, selected, out / "beir")
    if write_baseline:
        target = write_baseline if write_baseline.is_absolute() else root / write_baseline
        atomic_write(target, (json.dumps(ev.baseline_payload(run), indent=2, sort_keys=True) + "\n").encode())
    if gate:
        baseline_path = gate if gate.is_absolute() else root / gate
        if not baseline_path.is_file():
            raise UsageError(f"--gate {gate}: no such file (record one with `skillkb eval --write-baseline FILE`)")
        try:
            baseline = json.loads(baseline_path.read_text(encoding="utf-8"))
            if not isinstance(baseline.get("metrics"), dict) or not isinstance(baseline.get("cases"), dict):
                raise ValueError("no 'metrics' or 'cases' object")
        except (ValueError, AttributeError, UnicodeDecodeError) as exc:
            raise UsageError(
                f"--gate {gate} is not a skillkb baseline ({exc}); re-record it with --write-baseline"
            ) from None
        if baseline.get("retriever") != retriever:
            raise UsageError(f"baseline is for '{baseline.get('retriever')}', not '{retriever}'")
        result["gate_problems"] = ev.gate(run, baseline)
    return result


def list_entries(root: Path, tier: int | None = None, status: str | None = None) -> list[dict]:
    """One short record per entry (id, name, tier, status, reason, title), filtered by tier and status."""
    library = load_or_fail(root)
    return [
        {
            "id": e.id,
            "name": e.name,
            "tier": e.meta.tier,
            "status": e.meta.status.state.value,
            "status_reason": e.meta.status.reason,
            "title": e.meta.title,
            "title_zh": e.meta.title_zh,
        }
        for e in library.sorted_entries()
        if e.meta is not None
        and (tier is None or e.meta.tier == tier)
        and (status is None or e.meta.status.state.value == status)
    ]


def show(root: Path, entry_id: str) -> dict:
    library = load_or_fail(root)
    entry_id = entry_id.strip("/")
    matches = [e for e in library.sorted_entries() if entry_id in (e.id, e.name)]
    if not matches:
        raise UsageError(f"no entry '{entry_id}'; `skillkb list` shows every entry id")
    entry = matches[0]
    record = next(e for e in build_index(library).entries if e.id == entry.id).model_dump(mode="json")
    record["missing_gates"] = missing_gates(entry, library)
    return record


__all__ = [
    "DEFAULT_RETRIEVER",
    "MANIFEST_DIR",
    "GitError",
    "SkillkbError",
    "UsageError",
    "build_index",
    "evaluate",
    "index_drift",
    "list_entries",
    "load_library",
    "load_or_fail",
    "search",
    "show",
    "snapshot",
    "snapshot_artifact",
    "stale_schemas",
    "validate",
    "verify_readsets",
    "write_index",
    "write_schemas",
]
