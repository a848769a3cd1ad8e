"""Upstream drift: changed / moved / moved? / vanished files, the citations in them, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillkb.api import load_or_fail
from skillkb.cli import main
from skillkb.drift import (
    CHANGED,
    DEFAULT_FROM,
    DEFAULT_TO,
    DRIFT_PAGE,
    MOVED,
    MOVED_MAYBE,
    VANISHED,
    compute_drift,
    manifest_from_file,
    render_markdown,
)
from skillkb.manifests import MANIFEST_DIR

from conftest import DEMO_COMMIT, DEMO_FILES, REPO_ROOT, git

TO_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
FEATURE = "hardware/ascend/demo-feature"
MECHANISM = "repositories/vllm/demo-mechanism"
CONSTRAINT = "hardware/ascend/demo-constraint"
HEADER = "path\tblob\tbytes\tlines\n"

# Extra files at the from commit (path -> blob, bytes, lines), beyond conftest's DEMO_FILES.
EXTRA_FROM = {
    "src/old.py": ("4444444444444444444444444444444444444444", 100, 10),
    "src/util.py": ("5555555555555555555555555555555555555555", 100, 12),
}
# A file no entry reads, in both listings: it shares util.py's name but is no move target.
UNREAD = {"tests/util.py": ("7777777777777777777777777777777777777777", 50, 5)}
# The target listing: engine.py changed, pool.py unchanged, guide.md moved (same blob), old.py vanished,
# util.py replaced by a new same-name file elsewhere, and a same-name file that existed before (no candidate).
TO_FILES = {
    "src/engine.py": ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 4100, 125),
    "src/pool.py": DEMO_FILES["src/pool.py"],
    "docs/manual/guide.md": DEMO_FILES["docs/guide.md"],
    "lib/util.py": ("6666666666666666666666666666666666666666", 120, 14),
    **UNREAD,
}
EXPECTED_KINDS = {
    "src/engine.py": CHANGED,
    "docs/guide.md": MOVED,
    "src/old.py": VANISHED,
    "src/util.py": MOVED_MAYBE,
}


def manifest_text(files: dict[str, tuple[str, int, int]]) -> str:
    return HEADER + "".join(f"{p}\t{b}\t{n}\t{lines}\n" for p, (b, n, lines) in sorted(files.items()))


def readset_file(path: str, blob: str, lines: str = "1-5") -> str:
    return f'      - path: {path}\n        blob: "{blob}"\n        lines: "{lines}"\n        scope: demo\n'


def make_drift_library(root: Path) -> tuple[Path, Path]:
    """Give the fixture library files that drift in every way; return (from manifest, to manifest)."""
    from_manifest = root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv"
    from_manifest.write_text(manifest_text({**DEMO_FILES, **EXTRA_FROM, **UNREAD}))
    to_manifest = root / MANIFEST_DIR / f"acme__widget@{TO_COMMIT}.tsv"
    to_manifest.write_text(manifest_text(TO_FILES))

    meta = root / FEATURE / "entry.yaml"
    pinned = "".join(readset_file(p, b) for p, (b, _, _) in sorted({**DEMO_FILES, **EXTRA_FROM}.items()))
    at_target = f'  - repo: acme/widget\n    commit: "{TO_COMMIT}"\n    files:\n' + readset_file(
        "src/engine.py", TO_FILES["src/engine.py"][0]
    )
    text = meta.read_text()
    start = text.index("      - path: src/pool.py")
    end = text.index("cross_refs:")
    meta.write_text(text[:start] + pinned + at_target + text[end:])

    skill = root / FEATURE / "SKILL.md"
    skill.write_text(
        skill.read_text()
        + "\n- Engine starts [widget@0123456:src/engine.py#L2-L4]"
        + " and reads the guide [widget@0123456:docs/guide.md#L3].\n"
        + "- Old helper [widget@0123456:src/old.py#L1-L2]; util [widget@0123456:src/util.py#L5-L6].\n"
        + "- At main the engine [widget@fedcba9:src/engine.py#L1-L2].\n"
    )
    refs = root / FEATURE / "references"
    refs.mkdir()
    (refs / "deep.md").write_text("# Deep\n\nThe engine loop [widget@0123456:src/engine.py#L3-L5].\n")

    # demo-constraint reads only at the target commit.
    constraint = root / CONSTRAINT / "entry.yaml"
    constraint.write_text(constraint.read_text().replace(DEMO_COMMIT, TO_COMMIT))
    skill = root / CONSTRAINT / "SKILL.md"
    skill.write_text(skill.read_text().replace("widget@0123456", "widget@fedcba9"))
    return from_manifest, to_manifest


@pytest.fixture
def drift_root(library_root: Path) -> Path:
    make_drift_library(library_root)
    return library_root


def report_for(root: Path):
    library = load_or_fail(root)
    old = manifest_from_file(root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv")
    new = manifest_from_file(root / MANIFEST_DIR / f"acme__widget@{TO_COMMIT}.tsv")
    return library, compute_drift(library, old, new)


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().split("\n"), start=1) if needle in line)


def test_files_are_classified(drift_root: Path) -> None:
    _, report = report_for(drift_root)
    feature = report.by_id()[FEATURE]
    assert {f.path: f.kind for f in feature.drifted} == EXPECTED_KINDS
    by_path = {f.path: f for f in feature.drifted}
    assert by_path["docs/guide.md"].new_paths == ("docs/manual/guide.md",)
    assert by_path["src/util.py"].new_paths == ("lib/util.py",)
    assert by_path["src/engine.py"].new_blob == TO_FILES["src/engine.py"][0]
    assert (by_path["src/engine.py"].old_lines, by_path["src/engine.py"].new_lines) == (120, 125)
    assert feature.files_checked == len(DEMO_FILES) + len(EXTRA_FROM)


def test_reread_and_target_only_entries(drift_root: Path) -> None:
    _, report = report_for(drift_root)
    feature = report.by_id()[FEATURE]
    assert {f.path for f in feature.drifted if f.reread_at_target} == {"src/engine.py"}
    assert feature.target_readset_files == 1
    assert report.target_only == [CONSTRAINT]
    assert CONSTRAINT not in report.by_id()
    mechanism = report.by_id()[MECHANISM]  # reads only src/pool.py, which is unchanged
    assert mechanism.drifted == [] and mechanism.citations == []


def test_citations_in_drifted_files(drift_root: Path) -> None:
    _, report = report_for(drift_root)
    hits = {(c.file, c.line, c.path, c.start, c.end) for c in report.by_id()[FEATURE].citations}
    skill = drift_root / FEATURE / "SKILL.md"
    deep = drift_root / FEATURE / "references" / "deep.md"
    engine_line = line_of(skill, "Engine starts")
    helper_line = line_of(skill, "Old helper")
    expected = {
        (f"{FEATURE}/SKILL.md", engine_line, "src/engine.py", 2, 4),
        (f"{FEATURE}/SKILL.md", engine_line, "docs/guide.md", 3, 3),
        (f"{FEATURE}/SKILL.md", helper_line, "src/old.py", 1, 2),
        (f"{FEATURE}/SKILL.md", helper_line, "src/util.py", 5, 6),
        (f"{FEATURE}/references/deep.md", line_of(deep, "engine loop"), "src/engine.py", 3, 5),
    }
    # pool.py citations (unchanged file) and the citation of the target-commit readset are not listed.
    assert hits == expected


def test_markdown_report(drift_root: Path) -> None:
    _, report = report_for(drift_root)
    text = render_markdown(report)
    assert text.startswith("<!-- Generated by `skillkb coverage`")
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert f"| `{FEATURE}` | 5 | 1 | 1 | 1 | 1 | 5 | 3 |" in text
    assert f"- `{CONSTRAINT}`: reads only at `{TO_COMMIT[:12]}`" in text
    assert f"- `{MECHANISM}` (1 file(s))" in text
    assert "moved to `docs/manual/guide.md`" in text
    assert "`SKILL.md:" in text and "`references/deep.md:" in text
    assert "(v1.0.0)" in text  # the tag of the pinned readsets


def test_cli_writes_deterministic_report(drift_root: Path, tmp_path: Path, capsys) -> None:
    old = drift_root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv"
    new = drift_root / MANIFEST_DIR / f"acme__widget@{TO_COMMIT}.tsv"
    out = tmp_path / "drift.md"
    args = ["--root", str(drift_root), "drift", "--from-manifest", str(old), "--to-manifest", str(new)]
    assert main([*args, "--out", str(out)]) == 0
    first = out.read_bytes()
    assert main([*args, "--out", str(out)]) == 0
    assert out.read_bytes() == first
    assert "unchanged" in capsys.readouterr().out
    _, report = report_for(drift_root)
    assert first == render_markdown(report).encode()
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["from_commit"] == DEMO_COMMIT and data["to_commit"] == TO_COMMIT
    feature = next(e for e in data["entries"] if e["entry_id"] == FEATURE)
    assert {f["path"]: f["kind"] for f in feature["drifted"]} == EXPECTED_KINDS


def test_unchanged_pair_reports_nothing(drift_root: Path, capsys) -> None:
    old = drift_root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv"
    assert main(["--root", str(drift_root), "drift", "--from-manifest", str(old), "--to-manifest", str(old)]) == 0
    text = capsys.readouterr().out
    assert "None: no file read at the from commit drifted." in text
    assert f"- `{FEATURE}` (5 file(s))" in text


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "--to-manifest"),
        (["--to-manifest", "nowhere.tsv"], "no manifest file at nowhere.tsv"),
        (["--to-clone", "x"], "--to-clone PATH with --to-rev"),
        (["--to-clone", "x", "--to-rev", "HEAD"], "needs --repo"),
        (["--to-manifest", "a.tsv", "--to-rev", "HEAD"], "not both"),
        (["--to-manifest", "a.tsv", "--out", "."], "is a folder"),
    ],
)
def test_usage_errors(drift_root: Path, capsys, extra: list[str], message: str) -> None:
    old = drift_root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv"
    assert main(["--root", str(drift_root), "drift", "--from-manifest", str(old), *extra]) == 2
    assert message in capsys.readouterr().err


def test_partial_or_foreign_target_is_refused(drift_root: Path, tmp_path: Path, capsys) -> None:
    old = drift_root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv"
    partial = tmp_path / f"acme__widget@{TO_COMMIT}.partial.tsv"
    partial.write_text(manifest_text(TO_FILES))
    base = ["--root", str(drift_root), "drift", "--from-manifest", str(old)]
    assert main([*base, "--to-manifest", str(partial)]) == 2
    assert "partial manifest" in capsys.readouterr().err
    foreign = tmp_path / f"other__repo@{TO_COMMIT}.tsv"
    foreign.write_text(manifest_text(TO_FILES))
    assert main([*base, "--to-manifest", str(foreign)]) == 2
    assert "different repositories" in capsys.readouterr().err


def test_malformed_manifest_names_the_file(drift_root: Path, tmp_path: Path, capsys) -> None:
    old = drift_root / MANIFEST_DIR / f"acme__widget@{DEMO_COMMIT}.tsv"
    bad = tmp_path / f"acme__widget@{TO_COMMIT}.tsv"
    bad.write_text("path,blob\n")
    assert main(["--root", str(drift_root), "drift", "--from-manifest", str(old), "--to-manifest", str(bad)]) == 1
    err = capsys.readouterr().err
    assert bad.name in err and "manifest-header" in err


# ------------------------------------------------------------------------------------- from clones


def test_clone_variant(library_root: Path, tmp_path: Path, capsys) -> None:
    clone = tmp_path / "up"
    clone.mkdir()
    git(clone, "init", "-q")
    (clone / "src").mkdir()
    (clone / "src" / "a.py").write_text("".join(f"line {i}\n" for i in range(20)))
    (clone / "src" / "b.py").write_text("b\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "one")
    git(clone, "tag", "v1")
    first = git(clone, "rev-parse", "HEAD").strip()
    blob_a = git(clone, "rev-parse", "HEAD:src/a.py").strip()
    blob_b = git(clone, "rev-parse", "HEAD:src/b.py").strip()
    (clone / "src" / "a.py").write_text("changed\n")
    git(clone, "mv", "src/b.py", "src/c.py")
    git(clone, "commit", "-qam", "two")

    meta = library_root / FEATURE / "entry.yaml"
    text = meta.read_text()
    start, end = text.index("  - repo: acme/widget"), text.index("cross_refs:")
    readset = (
        f'  - repo: acme/up\n    commit: "{first}"\n    files:\n'
        + readset_file("src/a.py", blob_a)
        + (readset_file("src/b.py", blob_b, "1-1"))
    )
    meta.write_text(text[:start] + readset + text[end:])
    skill = library_root / FEATURE / "SKILL.md"
    skill.write_text(skill.read_text() + f"\n- A fact [up@{first[:7]}:src/a.py#L2-L3].\n")

    args = [
        "--root",
        str(library_root),
        "drift",
        "--repo",
        "acme/up",
        "--from-clone",
        str(clone),
        "--from-rev",
        "v1",
        "--to-clone",
        str(clone),
        "--to-rev",
        "HEAD",
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "| `src/a.py` | changed" in text
    assert "| `src/b.py` | moved to `src/c.py`" in text
    assert f"`SKILL.md:{line_of(skill, 'A fact')}` → L2-L3" in text
    assert main([*args[:-1], "no-such-rev"]) == 1
    assert "git:" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ the real pair


def test_default_pair_is_committed() -> None:
    for name in (DEFAULT_FROM, DEFAULT_TO):
        assert (REPO_ROOT / MANIFEST_DIR / name).is_file(), name


def test_cli_on_default_pair_matches_committed_page(tmp_path: Path) -> None:
    out = tmp_path / "drift.md"
    args = [
        "--root",
        str(REPO_ROOT),
        "drift",
        "--from-manifest",
        str(REPO_ROOT / MANIFEST_DIR / DEFAULT_FROM),
        "--to-manifest",
        str(REPO_ROOT / MANIFEST_DIR / DEFAULT_TO),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert out.read_bytes() == (REPO_ROOT / DRIFT_PAGE).read_bytes(), "run `skillkb coverage` and commit"
