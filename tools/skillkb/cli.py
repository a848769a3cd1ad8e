"""The ``skillkb`` command line: thin commands over the library API."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from .diagnostics import Diagnostic, GitError, MissingExtra, SkillkbError, UsageError, errors_only, to_json
from .retrieval import DEFAULT_RETRIEVER, RETRIEVERS, search

RETRIEVER_CHOICES = list(RETRIEVERS)
COUNT_METRICS = ("cases", "in_scope", "out_of_scope")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def find_root(start: Path) -> Path:
    """The library root: the nearest folder upwards holding schemas/tier-rules.yaml."""
    for folder in (start, *start.parents):
        if (folder / "schemas" / "tier-rules.yaml").is_file():
            return folder
    raise UsageError(f"no library found at or above {start} (no schemas/tier-rules.yaml); pass --root")


def library_root(given: Path | None) -> Path:
    """``--root`` checked (it must be a library folder), or the library found upwards from the cwd."""
    if given is None:
        return find_root(Path.cwd()).resolve()
    root = given.expanduser().resolve()
    if not root.is_dir():
        raise UsageError(f"--root {given}: no such folder")
    if not (root / "schemas" / "tier-rules.yaml").is_file():
        raise UsageError(f"--root {given} is not a library (no schemas/tier-rules.yaml there)")
    return root


def safe_streams() -> None:
    """Never die printing: characters the terminal's encoding lacks come out as escapes."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def utf8_stdout() -> bool:
    return (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") in ("utf8", "utf8sig")


def print_diagnostics(diagnostics: list[Diagnostic], fmt: str) -> int:
    errors = errors_only(diagnostics)
    if fmt == "json":
        sys.stdout.write(to_json(diagnostics))
    else:
        for diag in diagnostics:
            print(diag.render(), file=sys.stderr if diag in errors else sys.stdout)
        print(
            f"{len(errors)} error(s), {len(diagnostics) - len(errors)} warning(s)",
            file=sys.stderr if errors else sys.stdout,
        )
    return EXIT_FAIL if errors else EXIT_OK


# ---------------------------------------------------------------------------------------- commands


def cmd_validate(args: argparse.Namespace) -> int:
    from . import api

    return print_diagnostics(api.validate(args.root, args.cases), args.format)


def cmd_index(args: argparse.Namespace) -> int:
    from . import api

    library = api.load_or_fail(args.root)
    if args.check:
        drift = api.index_drift(library)
        for entry_id in drift:
            print(f"skill-index.json differs for: {entry_id}", file=sys.stderr)
        if drift:
            print("run `skillkb index` and commit the result", file=sys.stderr)
            return EXIT_FAIL
        print("skill-index.json is up to date")
        return EXIT_OK
    changed = api.write_index(library)
    print("skill-index.json " + ("written" if changed else "unchanged"))
    return EXIT_OK


def cmd_schemas(args: argparse.Namespace) -> int:
    from . import api

    if args.check:
        stale = api.stale_schemas(args.root)
        for name in stale:
            print(f"schemas/{name} differs from the models; run `skillkb schemas`", file=sys.stderr)
        return EXIT_FAIL if stale else EXIT_OK
    for name in api.write_schemas(args.root):
        print(f"wrote schemas/{name}")
    return EXIT_OK


def cmd_snapshot(args: argparse.Namespace) -> int:
    from . import api

    out_dir = args.out or args.root / api.MANIFEST_DIR
    if (args.clone is None) == (args.artifact is None):
        raise UsageError("pass either --clone PATH (a git clone) or --artifact FILE (a release sdist or wheel)")
    if args.artifact is not None:
        path = api.snapshot_artifact(args.artifact, args.repo, args.commit, out_dir, tag=args.tag, url=args.url)
    else:
        path = api.snapshot(Path(args.clone), args.repo, args.commit, out_dir)
    print(path)
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from . import api

    clones: dict[str, Path] = {}
    for spec in args.clone or []:
        repo, sep, path = spec.partition("=")
        if not sep or "/" not in repo:
            raise UsageError(f"--clone takes OWNER/NAME=PATH, got '{spec}'")
        clones[repo] = Path(path)
    artifacts: dict[str, Path] = {}
    for spec in args.artifact or []:
        repo, sep, path = spec.partition("=")
        if not sep or "/" not in repo:
            raise UsageError(f"--artifact takes OWNER/NAME=FILE, got '{spec}'")
        artifacts[repo] = Path(path)
    return print_diagnostics(api.verify_readsets(args.root, clones, artifacts), args.format)


def cmd_search(args: argparse.Namespace) -> int:
    retriever = args.retriever or DEFAULT_RETRIEVER
    result = search(args.root, args.query, k=args.k, retriever=retriever, tier=args.tier, explain=args.explain)
    for problem in result.library_problems:
        print(f"skillkb: warning: skipped while loading the library: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.public(), ensure_ascii=not utf8_stdout()))
        return EXIT_OK
    if not result.query:
        print("The query is empty.")
        return EXIT_OK
    if result.abstained:
        print("No skill in the library answers this query.")
        if result.related:
            print("Nearest entries (related, not an answer): " + ", ".join(h.id for h in result.related))
    if result.close_call:
        print("Close call: the first two hits score almost alike; read both before acting on the first.")
    for rank, hit in enumerate(result.results, start=1):
        print(f"{rank}. {hit.id}  [{hit.score:.4f}]  § {hit.heading}")
        print(f"   {hit.title}\n   {hit.path}#{hit.section}")
    if args.explain and result.explanation:
        print(render_explanation(result.explanation))
    return EXIT_OK


def render_explanation(explanation: dict) -> str:
    """The ``--explain`` block: query terms, per-hit matched fields and signatures, abstention features."""
    from .explain import render

    return render(explanation)


def cmd_eval(args: argparse.Namespace) -> int:
    from . import api

    if args.cases is not None and args.set is not None:
        raise UsageError("give --set or --cases, not both")
    from .loader import EVAL_SETS

    cases = args.cases or EVAL_SETS[args.set or "authored"]
    outcome = api.evaluate(
        args.root,
        cases=cases,
        retriever=args.retriever or DEFAULT_RETRIEVER,
        k=args.k,
        split=args.split,
        out=args.out,
        gate=args.gate,
        write_baseline=args.write_baseline,
        calibrate=args.calibrate,
        compare=args.compare,
    )
    report = outcome["report"]
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print_eval_report(report)
    for line in outcome.get("notes", []):
        if not line.startswith("paired randomisation"):
            print(line, file=sys.stderr)
    problems = outcome.get("gate_problems", [])
    for problem in problems:
        print(f"GATE: {problem}", file=sys.stderr)
    if args.gate:
        print(f"gate: {len(problems)} regression(s) against {args.gate}", file=sys.stderr)
    return EXIT_FAIL if problems else EXIT_OK


def print_eval_report(report: dict) -> None:
    """The eval report for a reader: metrics, per-language figures, the first failing cases, the comparison."""
    print(f"retriever {report['retriever']}  cases {int(report['metrics']['cases'])}")
    for name, value in report["metrics"].items():
        print(f"  {name:22s} {int(value)}" if name in COUNT_METRICS else f"  {name:22s} {value:.4f}")
    for lang, metrics in report["by_lang"].items():
        print(
            f"  [{lang}] hit@1 {metrics['hit@1']:.4f}  mrr@10 {metrics['mrr@10']:.4f}  "
            f"oos_abstention {metrics['oos_abstention']:.4f}"
        )
    failing = [c for c in report["cases"] if not c["passed"]]
    print(f"  failing cases: {len(failing)}")
    for case in failing[:30]:
        print(f"    {case['id']}: {case['query'][:70]!r} -> {case['ranked'][:2] or 'abstained'}")
    comparison = report.get("comparison")
    if comparison:
        print(
            f"  paired randomisation on {comparison['metric']} over {comparison['cases']} in-scope cases: "
            f"{comparison['a']} {comparison['mean_a']:.4f} vs {comparison['b']} {comparison['mean_b']:.4f}, "
            f"p = {comparison['p_value']:.4f}"
        )


def warn_skipped(problems: list[str]) -> None:
    for problem in problems:
        print(f"skillkb: warning: skipped while loading the library: {problem}", file=sys.stderr)


def cmd_list(args: argparse.Namespace) -> int:
    from . import api

    rows, problems = api.list_entries(args.root, args.tier, args.status)
    warn_skipped(problems)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=not utf8_stdout()))
        return EXIT_OK
    for row in rows:
        print(f"{row['id']:60s} tier {row['tier']}  {row['status']:9s}  {row['title']}")
    print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from . import api

    shown = api.show(args.root, args.id)
    if shown.record is None:
        for problem in shown.own_problems:
            print(problem, file=sys.stderr)
        print(f"skillkb: entry '{args.id.strip('/')}' does not load; fix the error(s) above", file=sys.stderr)
        return EXIT_FAIL
    warn_skipped(shown.other_problems)
    if args.json:
        print(json.dumps(shown.record, indent=2, ensure_ascii=not utf8_stdout()))
        return EXIT_OK
    print_record(shown.record)
    return EXIT_OK


def print_record(record: dict) -> None:
    print(f"{record['id']}  (tier {record['tier']}, {record['status']}, validation {record['validation']})")
    if record.get("status_reason"):
        print(f"  why {record['status']}: {record['status_reason']}")
    print(f"  {record['title']} / {record['title_zh']}")
    print(f"  owner: {record['owner']}   digest: {record['digest']}")
    for readset in record["readsets"]:
        print(
            f"  readset {readset['repo']}@{readset['commit'][:12]} ({readset['tag'] or '-'}): "
            f"{readset['files']} file(s), {readset['evidence']}"
        )
    for ref in record["cross_refs"]:
        print(f"  {ref['relation']}: {ref['id']}")
    if record["missing_gates"]:
        print("  gates missing: " + "; ".join(record["missing_gates"]))
    print(f"  {record['path']}")


# ------------------------------------------------------------------------------------------ parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``command``, only the module that owns it is imported (fast start-up)."""
    parser = argparse.ArgumentParser(
        prog="skillkb", description="Validate, index, search and evaluate the skill library."
    )
    parser.add_argument("--root", type=Path, default=None, help="library root (default: found upwards from cwd)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check every entry, manifest and eval case")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--cases", type=Path, default=None, help="eval cases file (default evals/retrieval/cases.jsonl)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("index", help="write skill-index.json, or --check it for drift")
    p.add_argument("--check", action="store_true", help="exit 1 and name the entries whose record differs")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("schemas", help="write schemas/*.json from the models, or --check them")
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=cmd_schemas)

    readsets = sub.add_parser("readsets", help="upstream manifests and readset verification")
    rsub = readsets.add_subparsers(dest="readsets_command", required=True, metavar="ACTION")
    p = rsub.add_parser(
        "snapshot", help="write sources/manifests/OWNER__NAME@COMMIT[.artifact].tsv from a git clone or a release"
    )
    p.add_argument("--clone", default=None, help="path to a git clone (bare is fine)")
    p.add_argument("--artifact", type=Path, default=None, help="a published release sdist (.tar.gz) or wheel")
    p.add_argument("--repo", required=True, help="OWNER/NAME")
    p.add_argument("--commit", required=True, help="commit or tag to list (with --artifact: the tag's full commit)")
    p.add_argument("--tag", default=None, help="with --artifact: the release tag, recorded in the sidecar")
    p.add_argument("--url", default=None, help="with --artifact: where the artifact was downloaded from")
    p.add_argument("--out", type=Path, default=None, help="output folder (default sources/manifests)")
    p.set_defaults(func=cmd_snapshot)
    p = rsub.add_parser("verify", help="check readsets against the manifests, and against clones")
    p.add_argument("--clone", action="append", metavar="OWNER/NAME=PATH", help="verify that repo against a clone")
    p.add_argument(
        "--artifact", action="append", metavar="OWNER/NAME=FILE", help="verify that repo against a release artifact"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "show",
        help="print one entry's record (exit 1 with its errors if it does not load)",
        description="Print one entry's record. Entries that do not load are reported on stderr and do not stop "
        "it: a valid entry exits 0, an entry that does not load exits 1 with its errors, an unknown id exits 2.",
    )
    p.add_argument("id", help="entry id (its path), e.g. hardware/ascend/ascend-aclgraph-capture-replay")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser(
        "list",
        help="list the entries: id, tier, status and title",
        description="List every entry that loads: id, tier, status and title. Entries that do not load are "
        "left out and reported on stderr; the exit status is still 0 (`skillkb validate` fails on them).",
    )
    p.add_argument("--tier", type=int, choices=[1, 2, 3], default=None, help="only entries of this tier")
    p.add_argument("--status", choices=["candidate", "to-refine", "covered", "deferred"], default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("search", help="find the skills that answer a query (English, Chinese, error strings)")
    p.add_argument("query", help="what you are looking for, e.g. an error message")
    p.add_argument("--k", type=int, default=5, help="number of results (default 5)")
    p.add_argument(
        "--retriever",
        choices=RETRIEVER_CHOICES,
        default=None,
        help=f"ranking method (default {DEFAULT_RETRIEVER}, the best in the committed eval)",
    )
    p.add_argument("--tier", type=int, choices=[1, 2, 3], default=None, help="only entries of this tier")
    p.add_argument("--json", action="store_true", help="print the machine-readable result")
    p.add_argument(
        "--explain", action="store_true", help="show which query terms matched which fields and signatures, and why"
    )
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("eval", help="evaluate retrieval on labelled cases; --gate fails on regressions")
    p.add_argument(
        "--set",
        choices=["authored", "real"],
        default=None,
        help="authored (default: evals/retrieval/cases.jsonl) or real (users' questions, evals/retrieval/real/)",
    )
    p.add_argument("--cases", type=Path, default=None, help="any cases file instead of a named set")
    p.add_argument("--retriever", choices=RETRIEVER_CHOICES, default=None)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--split", choices=["dev", "test", "all"], default="all")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--out", type=Path, default=None, help="write report, TREC run, qrels and a BEIR folder here")
    p.add_argument("--gate", type=Path, default=None, metavar="BASELINE", help="fail on regressions vs BASELINE")
    p.add_argument("--write-baseline", type=Path, default=None, metavar="FILE", help="record this run as baseline")
    p.add_argument("--calibrate", action="store_true", help="choose abstention thresholds on the dev split")
    p.add_argument(
        "--compare",
        choices=RETRIEVER_CHOICES,
        default=None,
        help="also run this retriever and report a paired randomisation test",
    )
    p.set_defaults(func=cmd_eval)

    core = set(sub.choices)
    for name in COMMAND_MODULES:
        if command is None or command not in core:
            module = _command_module(name)
            if module is not None:
                module.register_cli(sub)
    return parser


# Modules that add their own subcommands with ``register_cli(subparsers)``; each keeps heavy imports
# (mkdocs, mcp, matplotlib) inside its command functions so the CLI starts fast.
COMMAND_MODULES = ("coverage", "site", "mcp_server", "export")


def _command_module(name: str):
    try:
        return importlib.import_module(f"skillkb.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"skillkb.{name}":
            return None
        raise


def _first_command(argv: list[str]) -> str | None:
    """The subcommand word in ``argv`` (skipping ``--root PATH``), or None."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--root":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    safe_streams()
    args_list = sys.argv[1:] if argv is None else argv
    parser = build_parser(_first_command(args_list))
    args = parser.parse_args(args_list)
    try:
        args.root = library_root(args.root)
        return args.func(args)
    except UsageError as exc:
        print(f"skillkb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SkillkbError as exc:
        return print_diagnostics(exc.diagnostics, getattr(args, "format", "text"))
    except GitError as exc:
        print(f"skillkb: git: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except MissingExtra as exc:
        print(f"skillkb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a path the user gave cannot be read or written: say which, never a traceback
        where = exc.filename or "a file"
        print(
            f"skillkb: cannot use {where}: {exc.strerror or exc} (check the path and its permissions)", file=sys.stderr
        )
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
