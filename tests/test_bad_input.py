"""Malformed input: each case breaks a valid library in one way and expects its own diagnostic.

The validator must report every one with the file, the code and a message that says what to fix, and
must never crash with a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from skillkb.api import validate
from skillkb.cli import main

from conftest import DEMO_COMMIT, entry_yaml, skill_md

FEATURE = "hardware/ascend/demo-feature"
T1 = "repositories/vllm/demo-mechanism"
T3 = "hardware/ascend/demo-constraint"


def edit(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, f"fixture text {old!r} not in {rel}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    return apply


def write(rel: str, data: bytes | str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)

    return apply


def append(rel: str, text: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        with (root / rel).open("a", encoding="utf-8") as handle:
            handle.write(text)

    return apply


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        for step in steps:
            step(root)

    return apply


def symlink_outside(root: Path) -> None:
    outside = root.parent / "outside.md"
    outside.write_text("secret\n")
    target = root / FEATURE / "references"
    target.mkdir()
    (target / "leak.md").symlink_to(outside)


def clone_entry_as(new_id: str, claimed_id: str | None = None) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        folder = root / new_id
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(folder.name, "A copy. Use when testing."), encoding="utf-8")
        owner = new_id.rsplit("/", 1)[0]
        (folder / "entry.yaml").write_text(entry_yaml(claimed_id or new_id, 2, owner), encoding="utf-8")

    return apply


def drop_readsets(root: Path) -> None:
    path = root / META
    text = path.read_text(encoding="utf-8")
    start, end = text.index("readsets:"), text.index("cross_refs:")
    path.write_text(text[:start] + "readsets: []\n" + text[end:], encoding="utf-8")


SKILL = f"{FEATURE}/SKILL.md"
META = f"{FEATURE}/entry.yaml"
CASES = "evals/retrieval/cases.jsonl"
TRAINING = "evals/retrieval/training/written.jsonl"
POOL_CITE = "[widget@0123456:src/pool.py#L1-L3]"

# (case id, mutation, file the diagnostic names, code, message fragment)
BAD_INPUT = [
    ("yaml-unreadable", edit(META, "tier: 2", "tier: [2"), META, "meta-yaml", "YAML does not parse"),
    (
        "frontmatter-yaml",
        edit(SKILL, "license: Apache-2.0", "license: [Apache"),
        SKILL,
        "frontmatter-yaml",
        "YAML does not parse",
    ),
    ("frontmatter-missing", edit(SKILL, "---\nname", "name"), SKILL, "frontmatter-missing", "must start with"),
    ("required-field-missing", edit(META, "title_zh: 演示条目\n", ""), META, "meta-schema", "Field required"),
    ("unknown-meta-field", append(META, "priority: high\n"), META, "meta-schema", "Extra inputs are not permitted"),
    (
        "unknown-frontmatter-key",
        edit(SKILL, "license:", "tier: 2\nlicense:"),
        SKILL,
        "frontmatter-unknown-key",
        "not one of the portable",
    ),
    (
        "name-not-folder",
        edit(SKILL, "name: demo-feature", "name: demo-other"),
        SKILL,
        "name-mismatch",
        "differs from its folder",
    ),
    ("name-uppercase", edit(SKILL, "name: demo-feature", "name: Demo-Feature"), SKILL, "name-invalid", "uppercase"),
    ("name-unicode", edit(SKILL, "name: demo-feature", "name: démo-feature"), SKILL, "name-invalid", "non-ASCII"),
    (
        "name-double-hyphen",
        edit(SKILL, "name: demo-feature", "name: demo--feature"),
        SKILL,
        "name-invalid",
        "kebab-case",
    ),
    ("name-missing", edit(SKILL, "name: demo-feature\n", ""), SKILL, "name-missing", "no 'name'"),
    (
        "description-empty",
        edit(SKILL, "description: Explains the demo pool feature. Use when the pool fails.", "description: ''"),
        SKILL,
        "description-empty",
        "missing or empty",
    ),
    (
        "description-too-long",
        edit(SKILL, "Use when the pool fails.", "Use when " + "x" * 1100),
        SKILL,
        "description-too-long",
        "over 1024",
    ),
    (
        "description-angle",
        edit(SKILL, "Use when the pool fails.", "Use when size < 4."),
        SKILL,
        "description-angle",
        "'<' or '>'",
    ),
    ("metadata-flow", edit(SKILL, "license:", "metadata: {team: npu}\nlicense:"), SKILL, "metadata-flow", "flow style"),
    (
        "metadata-not-strings",
        edit(SKILL, "license:", "metadata:\n  version: 2\nlicense:"),
        SKILL,
        "metadata-invalid",
        "strings to strings",
    ),
    ("branch-as-tag", edit(META, "tag: v1.0.0", "tag: main"), META, "meta-schema", "branch name"),
    (
        "branch-as-anchor",
        edit(META, "vllm: {ref: v0.25.1}", "vllm: {ref: releases/v0.25.1}"),
        META,
        "meta-schema",
        "branch name",
    ),
    ("branch-as-commit", edit(META, f'commit: "{DEMO_COMMIT}"', "commit: master"), META, "meta-schema", "branch name"),
    ("short-sha-commit", edit(META, f'commit: "{DEMO_COMMIT}"', 'commit: "0123456"'), META, "meta-schema", "short SHA"),
    (
        "short-sha-anchor",
        edit(META, "vllm_ascend: {ref: v0.25.1rc1}", "vllm_ascend: {ref: 9bf964cb}"),
        META,
        "meta-schema",
        "short SHA",
    ),
    (
        "sha-all-digits-unquoted",
        edit(META, '"2222222222222222222222222222222222222222"', "2222222222222222222222222222222222222222"),
        META,
        "sha-unquoted",
        "YAML as a number",
    ),
    (
        "sha-exponent-unquoted",
        edit(META, f'commit: "{DEMO_COMMIT}"', "commit: 1e34567890123456789012345678901234567890"),
        META,
        "sha-unquoted",
        "read by YAML as a number",
    ),
    (
        "blob-mismatch",
        edit(META, '"2222222222222222222222222222222222222222"', '"2222222222222222222222222222222222222223"'),
        META,
        "readset-blob-mismatch",
        "differs from the manifest",
    ),
    (
        "path-not-in-manifest",
        edit(META, "path: src/pool.py", "path: src/missing.py"),
        META,
        "readset-path-unknown",
        "is not in sources/manifests",
    ),
    (
        "readset-lines-past-end",
        edit(META, 'lines: "1-30"', 'lines: "1-31"'),
        META,
        "readset-lines-range",
        "past the end",
    ),
    (
        "manifest-missing",
        edit(META, f'commit: "{DEMO_COMMIT}"', 'commit: "' + "a" * 40 + '"'),
        META,
        "manifest-missing",
        "no manifest",
    ),
    ("readset-dotdot", edit(META, "path: src/pool.py", "path: ../src/pool.py"), META, "meta-schema", "climbs out"),
    ("readset-absolute", edit(META, "path: src/pool.py", "path: /etc/passwd"), META, "meta-schema", "is absolute"),
    (
        "citation-past-end",
        edit(SKILL, POOL_CITE, "[widget@0123456:src/pool.py#L28-L40]"),
        SKILL,
        "citation-range",
        "past the end",
    ),
    (
        "citation-reversed",
        edit(SKILL, POOL_CITE, "[widget@0123456:src/pool.py#L9-L3]"),
        SKILL,
        "citation-range",
        "empty or reversed",
    ),
    (
        "citation-not-in-readset",
        edit(SKILL, POOL_CITE, "[widget@0123456:src/engine.py#L1-L3]"),
        SKILL,
        "citation-unresolved",
        "is not a file of",
    ),
    (
        "citation-unknown-repo",
        edit(SKILL, POOL_CITE, "[gadget@0123456:src/pool.py#L1-L3]"),
        SKILL,
        "citation-unresolved",
        "no readset",
    ),
    (
        "citation-short-prefix",
        edit(SKILL, POOL_CITE, "[widget@0123:src/pool.py#L1-L3]"),
        SKILL,
        "citation-unresolved",
        "shorter than 7",
    ),
    (
        "citation-malformed",
        edit(SKILL, POOL_CITE, "[widget@0123456:src/pool.py:1-3]"),
        SKILL,
        "citation-malformed",
        "not a valid citation",
    ),
    (
        "citation-unread",
        both(edit(META, 'lines: "1-30"', 'lines: "10-30"')),
        SKILL,
        "citation-unread",
        "outside the lines read",
    ),
    (
        "xref-dangling",
        edit(META, "cross_refs: []", "cross_refs:\n  - {id: hardware/ascend/nowhere, relation: see-also}"),
        META,
        "xref-dangling",
        "no entry",
    ),
    (
        "xref-self",
        edit(META, "cross_refs: []", f"cross_refs:\n  - {{id: {FEATURE}, relation: see-also}}"),
        META,
        "xref-self",
        "refers to itself",
    ),
    (
        "xref-bad-relation",
        edit(META, "cross_refs: []", f"cross_refs:\n  - {{id: {T1}, relation: uses}}"),
        META,
        "meta-schema",
        "Input should be",
    ),
    (
        "id-not-path",
        edit(META, f"id: {FEATURE}", "id: hardware/ascend/demo-renamed"),
        META,
        "id-mismatch",
        "differs from the folder path",
    ),
    (
        "duplicate-id",
        clone_entry_as("hardware/ascend/demo-copy", claimed_id=FEATURE),
        "hardware/ascend/demo-copy/entry.yaml",
        "id-duplicate",
        "claimed by 2 entries",
    ),
    (
        "two-owners-one-name",
        clone_entry_as("hardware/host/demo-feature"),
        "hardware/host/demo-feature/SKILL.md",
        "name-duplicate",
        "owned by 2 entries",
    ),
    (
        "owner-wrong-for-tier",
        edit(f"{T1}/entry.yaml", "tier: 1", "tier: 2"),
        f"{T1}/entry.yaml",
        "owner-tier",
        "Tier 2 entries are owned by",
    ),
    (
        "owner-not-parent",
        edit(META, "owner: hardware/ascend", "owner: hardware/host"),
        META,
        "owner-mismatch",
        "is not the folder that holds",
    ),
    (
        "tier1-npu-terms",
        edit(
            f"{T1}/SKILL.md",
            "## Rules and invariants\n\nText.",
            "## Rules and invariants\n\nOn an Ascend NPU the graph differs.",
        ),
        f"{T1}/SKILL.md",
        "tier1-vocabulary",
        "NPU/Ascend/CANN vocabulary",
    ),
    (
        "tier1-npu-description",
        edit(f"{T1}/SKILL.md", "Use when it stalls.", "Use when torch_npu stalls."),
        f"{T1}/SKILL.md",
        "tier1-vocabulary",
        "torch_npu",
    ),
    (
        "tier3-assumes-vllm",
        edit(f"{T3}/SKILL.md", "## Configuration\n\nText.", "## Configuration\n\nSet it in the vLLM engine args."),
        f"{T3}/SKILL.md",
        "tier3-vocabulary",
        "vLLM vocabulary",
    ),
    (
        "covered-without-readsets",
        both(edit(META, "state: candidate", "state: covered"), drop_readsets),
        META,
        "gate-covered",
        "no readset",
    ),
    (
        "skill-md-is-a-folder",
        both(lambda root: (root / SKILL).unlink(), lambda root: (root / SKILL).mkdir()),
        SKILL,
        "not-regular-file",
        "not a regular file",
    ),
    (
        "covered-gates-unmet",
        edit(META, "state: candidate", "state: covered"),
        META,
        "gate-covered",
        "cited facts 3 < 15",
    ),
    (
        "deferred-without-reason",
        edit(META, "state: candidate", "state: deferred"),
        META,
        "meta-schema",
        "needs a non-empty 'reason'",
    ),
    ("status-unknown", edit(META, "state: candidate", "state: done"), META, "meta-schema", "Input should be"),
    (
        "validation-claimed-without-hardware",
        edit(META, "state: not_run", "state: reproduced"),
        META,
        "meta-schema",
        "needs 'hardware' and 'date'",
    ),
    ("symlink-escape", symlink_outside, f"{FEATURE}/references/leak.md", "symlink", "symlinks are refused"),
    (
        "non-utf8",
        write(SKILL, b"---\nname: demo-feature\ndescription: caf\xe9\n---\n"),
        SKILL,
        "file-not-utf8",
        "not valid UTF-8",
    ),
    (
        "bom",
        write(SKILL, "\ufeff" + skill_md("demo-feature", "Has a BOM. Use when testing.")),
        SKILL,
        "file-bom",
        "byte-order mark",
    ),
    ("empty-file", write(SKILL, ""), SKILL, "file-empty", "file is empty"),
    (
        "skill-5mb",
        write(SKILL, skill_md("demo-feature", "Huge. Use when testing.") + "x" * 5_000_000),
        SKILL,
        "file-too-large",
        "over the 262144-byte limit",
    ),
    (
        "script-tag",
        edit(SKILL, "## Configuration\n\nText.", "## Configuration\n\n<script>alert(1)</script>"),
        SKILL,
        "unsafe-html",
        "<script>",
    ),
    (
        "iframe-tag",
        edit(SKILL, "## Configuration\n\nText.", '## Configuration\n\n<iframe src="x"></iframe>'),
        SKILL,
        "unsafe-html",
        "<iframe>",
    ),
    (
        "javascript-link",
        edit(SKILL, "## Configuration\n\nText.", "## Configuration\n\n[click](javascript:alert(1))"),
        SKILL,
        "unsafe-link",
        "only http, https and mailto are allowed",
    ),
    (
        "relative-link-escape",
        edit(SKILL, "## Configuration\n\nText.", "## Configuration\n\n[x](../../../README.md)"),
        SKILL,
        "link-escape",
        "leaves the entry folder",
    ),
    (
        "absolute-link",
        edit(SKILL, "## Configuration\n\nText.", "## Configuration\n\n[x](/etc/passwd)"),
        SKILL,
        "link-escape",
        "absolute link",
    ),
    ("section-missing", edit(SKILL, "## Version notes\n", "## Notes\n"), SKILL, "section-missing", "Version notes"),
    (
        "reference-nested",
        write(f"{FEATURE}/references/deep/more.md", "# deep\n"),
        f"{FEATURE}/references/deep/more.md",
        "reference-depth",
        "one level deep",
    ),
    (
        "reference-not-markdown",
        write(f"{FEATURE}/references/run.sh", "echo hi\n"),
        f"{FEATURE}/references/run.sh",
        "reference-type",
        "Markdown",
    ),
    ("case-not-json", append(CASES, "{not json\n"), CASES, "case-json", "not JSON"),
    (
        "case-missing-field",
        append(CASES, '{"id": "demo-002", "query": "x", "lang": "en"}\n'),
        CASES,
        "case-schema",
        "Field required",
    ),
    (
        "case-unknown-entry",
        append(
            CASES,
            json.dumps({"id": "demo-003", "query": "q", "lang": "en", "expected": ["hardware/ascend/ghost"]}) + "\n",
        ),
        CASES,
        "case-unknown-entry",
        "unknown entry",
    ),
    (
        "case-duplicate-id",
        append(CASES, json.dumps({"id": "demo-001", "query": "q", "lang": "en", "expected": []}) + "\n"),
        CASES,
        "case-duplicate-id",
        "appears 2 times",
    ),
    ("training-not-json", write(TRAINING, "{not json\n"), TRAINING, "training-json", "not JSON"),
    (
        "training-bad-label",
        write(TRAINING, json.dumps({"text": "q", "label": "Not An Id", "lang": "en"}) + "\n"),
        TRAINING,
        "training-schema",
        "should match pattern",
    ),
    (
        "training-unknown-entry",
        write(TRAINING, json.dumps({"text": "q", "label": "hardware/ascend/ghost", "lang": "en"}) + "\n"),
        TRAINING,
        "training-unknown-entry",
        "unknown entry",
    ),
    (
        "training-duplicate",
        write(TRAINING, 2 * (json.dumps({"text": "q", "label": "none", "lang": "en"}) + "\n")),
        TRAINING,
        "training-duplicate",
        "more than once",
    ),
    (
        "training-title-from-an-eval-thread",
        both(
            write(
                "evals/retrieval/real/cases.jsonl",
                json.dumps(
                    {
                        "id": "real-demo-7",
                        "query": "q",
                        "expected": [],
                        "lang": "en",
                        "origin": "real",
                        "source": "https://github.com/acme/widget/issues/7",
                        "rationale": "r",
                    }
                )
                + "\n",
            ),
            write(
                TRAINING,
                json.dumps(
                    {
                        "text": "another q",
                        "label": "none",
                        "lang": "en",
                        "origin": "judged",
                        "source": "https://github.com/ACME/widget/pull/7",
                    }
                )
                + "\n",
            ),
        ),
        TRAINING,
        "training-eval-thread",
        "thread of the real eval set",
    ),
    (
        "training-judged-without-source",
        write(TRAINING, json.dumps({"text": "q", "label": "none", "lang": "en", "origin": "judged"}) + "\n"),
        TRAINING,
        "training-schema",
        "needs 'source'",
    ),
    (
        "training-thread-without-rationale",
        write(
            TRAINING,
            json.dumps(
                {
                    "text": "q",
                    "label": "none",
                    "lang": "en",
                    "origin": "thread",
                    "source": "https://github.com/acme/widget/issues/8",
                }
            )
            + "\n",
        ),
        TRAINING,
        "training-schema",
        "needs 'rationale'",
    ),
    (
        "manifest-bad-row",
        append(f"sources/manifests/acme__widget@{DEMO_COMMIT}.tsv", "broken-row\n"),
        f"sources/manifests/acme__widget@{DEMO_COMMIT}.tsv",
        "manifest-row",
        "expected 4 tab-separated cells",
    ),
]


def test_enough_cases() -> None:
    assert len(BAD_INPUT) >= 40
    assert len({case[0] for case in BAD_INPUT}) == len(BAD_INPUT)


@pytest.mark.parametrize(
    ("mutate", "file", "code", "fragment"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT]
)
def test_bad_input_is_reported(library_root: Path, mutate, file: str, code: str, fragment: str) -> None:
    assert [d for d in validate(library_root) if d.severity == "error"] == [], "fixture must start valid"
    mutate(library_root)
    diagnostics = validate(library_root)
    matching = [d for d in diagnostics if d.code == code and d.file == file]
    rendered = "\n".join(d.render() for d in diagnostics)
    assert matching, f"expected [{code}] on {file}; got:\n{rendered}"
    assert any(fragment in d.message for d in matching), f"expected '{fragment}' in:\n{rendered}"
    assert all(d.fix for d in matching), "every diagnostic says how to fix it"


@pytest.mark.parametrize("case", ["yaml-unreadable", "non-utf8", "symlink-escape", "sha-all-digits-unquoted"])
def test_cli_exits_1_with_json(library_root: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    mutate = next(c[1] for c in BAD_INPUT if c[0] == case)
    mutate(library_root)
    code = main(["--root", str(library_root), "validate", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["summary"]["errors"] >= 1
    assert all({"file", "line", "code", "field", "message", "fix"} <= set(d) for d in report["diagnostics"])


def test_line_numbers_point_at_the_field(library_root: Path) -> None:
    edit(META, "tag: v1.0.0", "tag: main")(library_root)
    (diag,) = [d for d in validate(library_root) if d.code == "meta-schema"]
    lines = (library_root / META).read_text().splitlines()
    assert "tag: main" in lines[diag.line - 1]


def test_clean_fixture_exits_0(library_root: Path) -> None:
    assert main(["--root", str(library_root), "validate"]) == 0
