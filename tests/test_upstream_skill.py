"""The model-adaptation entry is a superset of vllm-ascend's model-adapter agent skill: every heading of
the upstream skill at the pinned commit is mapped to a section of the entry that exists."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from skillkb.api import load_or_fail
from skillkb.upstream_skill import MAP_DIR, check_map, generated_pages, headings_digest, load_maps, markdown_headings

from conftest import REPO_ROOT

MAP = REPO_ROOT / MAP_DIR / "vllm-ascend-model-adapter.yaml"
ENTRY = "hardware/ascend/ascend-model-adaptation"


@pytest.fixture(scope="module")
def library():
    return load_or_fail(REPO_ROOT)


def the_map():
    maps, problems = load_maps(REPO_ROOT)
    assert problems == []
    (found,) = [m for m in maps if m.entry == ENTRY]
    return found


def test_every_upstream_heading_is_mapped_to_an_existing_section(library) -> None:
    skill_map = the_map()
    assert check_map(skill_map, library) == []
    headings = [h for f in skill_map.files for h in f.headings]
    assert len(headings) >= 70 and all(h.covered_by for h in headings)


def test_the_map_lists_every_file_of_the_upstream_skill_with_its_pinned_blob(library) -> None:
    skill_map = the_map()
    manifest = library.manifests.get(skill_map.repo, skill_map.commit)
    prefix = skill_map.root + "/"
    upstream = {p: r.blob for p, r in manifest.rows.items() if p.startswith(prefix) and p.endswith(".md")}
    assert {f.path: f.blob for f in skill_map.files} == upstream
    assert len(upstream) == 6  # SKILL.md and its five reference files at v0.25.1rc1


def test_the_generated_page_is_committed_and_current(library) -> None:
    for path, data in generated_pages(library).items():
        assert (REPO_ROOT / path).read_bytes() == data, f"{path} is stale: run `skillkb coverage`"


def test_an_unmapped_heading_or_missing_anchor_fails(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    shutil.copytree(REPO_ROOT, root, ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "site", "test-artifacts"))
    text = (root / MAP_DIR / MAP.name).read_text(encoding="utf-8")
    first = text.index("\n        covered_by:") + 9
    end = text.index("\n      - heading:", first)
    broken = text[:first] + "covered_by: []" + text[end:]
    target = broken.index('- "', broken.index("\n        covered_by:", first + 20))
    broken = broken[:target] + '- "SKILL.md#no-such-section"' + broken[broken.index("\n", target) :]
    (root / MAP_DIR / MAP.name).write_text(broken, encoding="utf-8")
    library = load_or_fail(root)
    (skill_map,) = [m for m in load_maps(root)[0] if m.entry == ENTRY]
    codes = {d.code for d in check_map(skill_map, library)}
    assert {"upstream-map-unmapped", "upstream-map-anchor"} <= codes


@pytest.mark.parametrize("change", ["drop", "rename"])
def test_a_heading_dropped_or_renamed_in_the_map_fails(tmp_path: Path, change: str) -> None:
    """CI has no upstream clone: the digest recorded from the real files is what catches an edited heading list."""
    root = tmp_path / "lib"
    shutil.copytree(REPO_ROOT, root, ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "site", "test-artifacts"))
    path = root / MAP_DIR / MAP.name
    text = path.read_text(encoding="utf-8")
    start = text.index("\n      - heading:", text.index("\n      - heading:") + 1)  # the file's second heading
    end = text.index("\n      - heading:", start + 1)
    if change == "drop":
        text = text[:start] + text[end:]
    else:
        line_end = text.index("\n", start + 1)
        text = text[:start] + '\n      - heading: "Renamed"' + text[line_end:]
    path.write_text(text, encoding="utf-8")
    (skill_map,) = [m for m in load_maps(root)[0] if m.entry == ENTRY]
    assert "upstream-map-headings" in {d.code for d in check_map(skill_map, load_or_fail(root))}


def test_headings_ignore_code_fences() -> None:
    text = "# Title\n\n```bash\n# not a heading\n```\n\n## Real\n"
    assert markdown_headings(text) == [(1, "Title", 1), (2, "Real", 7)]


def test_recorded_headings_equal_the_upstream_files_at_the_pin() -> None:
    """Runs where a clone of vllm-ascend is available (set SKILLKB_MIRROR_VLLM_ASCEND)."""
    clone = os.environ.get("SKILLKB_MIRROR_VLLM_ASCEND")
    if not clone:
        pytest.skip("no vllm-ascend clone here: set SKILLKB_MIRROR_VLLM_ASCEND to compare with the real files")
    skill_map = the_map()
    for mapped in skill_map.files:
        text = subprocess.run(
            ["git", f"--git-dir={clone}", "show", f"{skill_map.commit}:{mapped.path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        recorded = [(h.level, h.text, h.line) for h in mapped.headings]
        assert recorded == markdown_headings(text), mapped.path
        assert mapped.headings_sha256 == headings_digest(markdown_headings(text)), mapped.path
