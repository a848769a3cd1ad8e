"""Shared fixtures: the real repository root, and a small valid library built in a temp folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
RESERVED = SHARED / "eval-reserved.txt"


def reserved_threads() -> set:
    """Thread keys of the threads reserved for an independent measurement; the calling test is skipped,
    saying why, where the list is not beside this checkout (a user's clone has none)."""
    from skillkb.models import thread_key

    if not RESERVED.is_file():
        pytest.skip(f"{RESERVED} is not beside this checkout: the reserved list is checked where it exists")
    return {thread_key(line) for line in RESERVED.read_text(encoding="utf-8").splitlines() if "github.com" in line}


DEMO_REPO = "acme/widget"
DEMO_COMMIT = "0123456789abcdef0123456789abcdef01234567"
DEMO_FILES = {  # path -> (blob, bytes, lines)
    "src/engine.py": ("1111111111111111111111111111111111111111", 4000, 120),
    "src/pool.py": ("2222222222222222222222222222222222222222", 900, 30),
    "docs/guide.md": ("3333333333333333333333333333333333333333", 2000, 60),
}

SECTIONS = [
    "When to use",
    "Mental model",
    "Rules and invariants",
    "Triage",
    "Configuration",
    "Version notes",
    "中文摘要",
    "Sources",
]


def skill_md(name: str, description: str, facts: int = 3, extra_front: str = "", body_extra: str = "") -> str:
    cites = "\n".join(
        f"- Fact {i} about the pool [widget@0123456:src/pool.py#L{i}-L{i + 2}]." for i in range(1, facts + 1)
    )
    parts = [f"---\nname: {name}\ndescription: {description}\nlicense: Apache-2.0\n{extra_front}---\n", f"# {name}\n"]
    for section in SECTIONS:
        parts.append(f"## {section}\n")
        if section == "Mental model":
            parts.append(cites + "\n")
        elif section == "Triage":
            parts.append("| Symptom | Cause | Action |\n|---|---|---|\n| `boom` | pool | shrink it |\n")
        else:
            parts.append("Text.\n")
    return "\n".join(parts) + body_extra


def entry_yaml(entry_id: str, tier: int, owner: str, state: str = "candidate", extra: str = "") -> str:
    anchors = {
        1: "  vllm: {ref: v0.25.1}\n  torch: {ref: 2.10.0}\n",
        2: "  vllm_ascend: {ref: v0.25.1rc1}\n  vllm: {ref: v0.25.1}\n  cann: {ref: 9.0.1}\n"
        "  torch: {ref: 2.10.0}\n  torch_npu: {ref: 2.10.0.post2}\n",
        3: "  cann: {ref: 9.0.1}\n  torch: {ref: 2.10.0}\n  torch_npu: {ref: 2.10.0.post2}\n",
    }[tier]
    return (
        textwrap.dedent(f"""\
        id: {entry_id}
        title: Demo {entry_id.rsplit("/", 1)[1]}
        title_zh: 演示条目
        tier: {tier}
        owner: {owner}
        status:
          state: {state}
        empirical_validation:
          state: not_run
          evidence: Nothing ran; a log from real hardware would raise it.
        version_anchors:
        """)
        + anchors
        + textwrap.dedent(f"""\
        readsets:
          - repo: {DEMO_REPO}
            commit: "{DEMO_COMMIT}"
            tag: v1.0.0
            files:
              - path: src/pool.py
                blob: "2222222222222222222222222222222222222222"
                lines: "1-30"
                scope: the pool
        cross_refs: []
        keywords:
          en: [pool]
          zh: [内存池]
        """)
        + extra
    )


DEMO_ENTRIES = {
    "hardware/ascend/demo-feature": (2, "hardware/ascend", "Explains the demo pool feature. Use when the pool fails."),
    "repositories/vllm/demo-mechanism": (1, "repositories/vllm", "Explains the generic scheduler. Use when it stalls."),
    "hardware/ascend/demo-constraint": (3, "hardware/ascend", "Explains the device allocator. Use when it runs out."),
}


def write_library(root: Path) -> Path:
    (root / "schemas").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "schemas" / "tier-rules.yaml", root / "schemas" / "tier-rules.yaml")
    manifests = root / "sources" / "manifests"
    manifests.mkdir(parents=True)
    rows = "".join(f"{p}\t{b}\t{n}\t{lines}\n" for p, (b, n, lines) in sorted(DEMO_FILES.items()))
    (manifests / f"acme__widget@{DEMO_COMMIT}.tsv").write_text("path\tblob\tbytes\tlines\n" + rows)
    for entry_id, (tier, owner, description) in DEMO_ENTRIES.items():
        folder = root / entry_id
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(folder.name, description), encoding="utf-8")
        (folder / "entry.yaml").write_text(entry_yaml(entry_id, tier, owner), encoding="utf-8")
    cases = root / "evals" / "retrieval"
    cases.mkdir(parents=True)
    (cases / "cases.jsonl").write_text(
        '{"id": "demo-001", "query": "pool fails", "expected": ["hardware/ascend/demo-feature"], "lang": "en"}\n'
    )
    return root


def prepare_site(root: Path, home: bool = True) -> Path:
    """Give a fixture library the repository's mkdocs.yml (hooks by absolute path) and, unless told not to,
    a home page, so `skillkb docs build` can run on it."""
    config = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = (REPO_ROOT / "tools" / "skillkb" / "site_hooks.py").as_posix()
    (root / "mkdocs.yml").write_text(config.replace("tools/skillkb/site_hooks.py", hooks), encoding="utf-8")
    (root / "docs").mkdir(exist_ok=True)
    if home:
        (root / "docs" / "index.md").write_text("# Demo library\n\nHome.\n", encoding="utf-8")
    return root


@pytest.fixture
def library_root(tmp_path: Path) -> Path:
    return write_library(tmp_path / "lib")


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity and clock, so commits are reproducible."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout
