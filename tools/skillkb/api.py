"""The library API behind the CLI; tests and other tools call these functions directly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .diagnostics import Diagnostic, GitError, SkillkbError, UsageError, errors_only, sort_key
from .fsutil import atomic_write
from .index import build_index, index_drift, write_index
from .loader import CASES_FILE, EVAL_SETS, Library, load_cases, load_library
from .manifests import MANIFEST_DIR
from .models import EvalCase
from .readsets import (
    snapshot,
    snapshot_artifact,
    verify_against_artifact,
    verify_against_clone,
    verify_against_manifests,
)
from .retrieval import DEFAULT_RETRIEVER, RETRIEVERS, WEIGHT_KEYS, SearchEngine, engine_for, load_servable, search
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


def calibration_cases(root: Path) -> list[EvalCase]:
    """The dev cases abstention is fitted on: authored and real dev together (real dev holds the in-domain
    questions the library does not cover, the negatives that teach it where the library ends)."""
    out: list[EvalCase] = []
    for path in EVAL_SETS.values():
        if (root / path).is_file():
            out += [c for c in load_cases_or_fail(root, path) if c.split == "dev"]
    return out


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
    notes = _calibrate(root, engine, retriever) if calibrate else []
    selected = all_cases if split == "all" else [c for c in all_cases if c.split == split]
    run = ev.run_eval(engine, selected, retriever, k)
    report = run.report()
    report["cases_file"] = cases.as_posix()
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
        result["gate_problems"] = ev.gate(run, _gate_baseline(root, gate, retriever))
    return result


def _calibrate(root: Path, engine: SearchEngine, retriever: str) -> list[str]:
    """Fit the query classifier, the combined ranker's weights per language and every retriever's abstention
    on the calibration (dev) cases; write them to the calibration file and into ``engine``. Returns notes."""
    from . import evaluation as ev

    dev = calibration_cases(root)
    classifier, held_out, classifier_stats = ev.fit_classifier(engine, load_or_fail(root), dev)
    engine.calibration.classifier = classifier
    engine.drop_ranker("combined")
    notes = [f"fitted query classifier: {classifier_stats}"]
    stats: dict[str, dict] = {"classifier": classifier_stats}
    for language, key in WEIGHT_KEYS.items():  # rank first: abstention is fitted on the ranking
        weights, stats[f"{key}-ranker"] = ev.fit_combined(engine, dev, held_out, language)
        engine.calibration.rankers[key] = weights
        notes.append(f"fitted {key} ranker ({language} questions): {weights} {stats[f'{key}-ranker']}")
    engine.drop_ranker("combined")
    models = dict(engine.calibration.models)
    for name in sorted({retriever, *RETRIEVERS}):
        models[name], stats[name] = ev.calibrate(engine, dev, name, held_out=held_out)
        notes.append(f"calibrated {name}: {models[name].to_json()} {stats[name]}")
    ev.write_calibration(root, models, stats, engine.calibration.rankers, classifier)
    engine.calibration.models.update(models)
    return notes


def _gate_baseline(root: Path, gate: Path, retriever: str) -> dict:
    """The baseline a ``--gate`` run compares against, or a UsageError saying how to record a usable one."""
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
    return baseline


def entry_rows(library: Library, tier: int | None = None, status: str | None = None) -> list[dict]:
    """One short record per entry (id, name, tier, status, reason, title), filtered by tier and status."""
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


def list_entries(root: Path, tier: int | None = None, status: str | None = None) -> tuple[list[dict], list[str]]:
    """Every entry that loads (as search serves them), and the problems of those that do not."""
    library, problems = load_servable(root)
    return entry_rows(library, tier, status), problems


@dataclass
class Shown:
    """What ``show`` found: the entry's record (None when it does not load), the problems of its own files
    when it does not, and the problems of the rest of the library."""

    record: dict | None
    own_problems: list[str]
    other_problems: list[str]


def show(root: Path, entry_id: str) -> Shown:
    """The index record of the entry with this id or folder name, plus the gates it still misses. A broken
    entry gives its own diagnostics instead; an id that names no entry folder is a UsageError."""
    from .index import index_entry

    entry_id = entry_id.strip("/")
    library, problems = load_servable(root)
    library.cases, case_problems = load_cases(root / CASES_FILE, CASES_FILE.as_posix())  # the gates count them
    problems += [d.render() for d in errors_only(case_problems)]
    entry = next((e for e in library.sorted_entries() if entry_id in (e.id, e.name)), None)
    if entry is not None:
        record = index_entry(entry, library).model_dump(mode="json")
        record["missing_gates"] = missing_gates(entry, library)
        return Shown(record, [], problems)
    folder = _entry_folder(root, entry_id)
    own = [p for p in problems if folder and p.startswith((f"{folder}/", f"{folder}:"))]
    if not own:
        raise UsageError(f"no entry '{entry_id}'; `skillkb list` shows every entry id")
    return Shown(None, own, [p for p in problems if p not in own])


def _entry_folder(root: Path, entry_id: str) -> str | None:
    """The id of the entry folder named ``entry_id`` (its path or its folder name), loadable or not."""
    from .loader import scan_entry_tree

    folders, _links = scan_entry_tree(root)
    ids = [f.relative_to(root).as_posix() for f in folders]
    return next((i for i in ids if entry_id in (i, i.rsplit("/", 1)[-1])), None)


__all__ = [
    "DEFAULT_RETRIEVER",
    "MANIFEST_DIR",
    "GitError",
    "Shown",
    "SkillkbError",
    "UsageError",
    "build_index",
    "entry_rows",
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
