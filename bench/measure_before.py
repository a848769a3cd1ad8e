"""Measure an earlier commit's retrieval on today's library: the "before" of a retrieval change.

    .venv/bin/python bench/measure_before.py REV OUT_DIR

Checks out REV's tools into a temporary git worktree, puts today's entries, manifests and cases beside
them (entry and case fields REV's schema does not know are dropped), and runs REV's own ``skillkb eval --json``
with REV's default retriever and calibration on both case sets and both splits. Writes
``OUT_DIR/report-<set>-<split>.json`` trimmed to the metrics and the per-case outcomes, which
``bench/bench_retrieval.py --before OUT_DIR`` compares against in paired tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = {"authored": Path("evals/retrieval/cases.jsonl"), "real": Path("evals/retrieval/real/cases.jsonl")}
OLD_CASE_FIELDS = ("id", "query", "expected", "acceptable", "negatives", "lang", "split", "tags")
CONTENT = ("hardware", "repositories", "sources/manifests")


def old_cases(path: Path, out: Path) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out.write_text(
        "".join(json.dumps({k: r[k] for k in OLD_CASE_FIELDS if k in r}, ensure_ascii=False) + "\n" for r in rows),
        encoding="utf-8",
    )


def old_entries(tree: Path) -> None:
    """Drop entry.yaml keys REV's schema does not know (its models are strict), keeping the rest as written."""
    import yaml

    known = set(json.loads((tree / "schemas" / "entry.schema.json").read_text())["properties"])
    for path in sorted((tree / "hardware").rglob("entry.yaml")) + sorted((tree / "repositories").rglob("entry.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if set(data) - known:
            kept = {k: v for k, v in data.items() if k in known}
            path.write_text(yaml.safe_dump(kept, allow_unicode=True, sort_keys=False), encoding="utf-8")


def trimmed(report: dict) -> dict:
    keep = ("id", "lang", "split", "expected", "ranked", "abstained", "hit_rank", "passed")
    return {
        "retriever": report["retriever"],
        "metrics": report["metrics"],
        "by_lang": report["by_lang"],
        "cases": [{**{k: c[k] for k in keep}, "ranked": c["ranked"][:5]} for c in report["cases"]],
    }


def main() -> None:
    rev, out = sys.argv[1], Path(sys.argv[2]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True)
        try:
            for part in CONTENT:
                shutil.rmtree(tree / part, ignore_errors=True)
                shutil.copytree(ROOT / part, tree / part)
            old_entries(tree)
            for set_name, path in SETS.items():
                cases = Path(tmp) / f"{set_name}.jsonl"
                old_cases(ROOT / path, cases)
                for split in ("dev", "test"):
                    code = (
                        "import sys; from skillkb.cli import main; "
                        f"sys.exit(main(['--root', {str(tree)!r}, 'eval', '--cases', {str(cases)!r}, "
                        f"'--split', {split!r}, '--json']))"
                    )
                    env = {"PYTHONPATH": str(tree / "tools"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
                    done = subprocess.run(
                        [str(ROOT / ".venv" / "bin" / "python"), "-c", code],
                        capture_output=True,
                        text=True,
                        env=env,
                        check=False,
                    )
                    if not done.stdout.strip():
                        raise SystemExit(f"{rev} eval failed for {set_name} {split}:\n{done.stderr[-2000:]}")
                    report = trimmed(json.loads(done.stdout))
                    target = out / f"report-{set_name}-{split}.json"
                    target.write_text(json.dumps(report, ensure_ascii=False) + "\n", encoding="utf-8")
                    m = report["metrics"]
                    label = f"{rev} {report['retriever']} {set_name} {split}"
                    print(f"{label}: hit@1 {m['hit@1']:.3f} mrr {m['mrr@10']:.3f}")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


if __name__ == "__main__":
    main()
