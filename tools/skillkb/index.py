"""``skill-index.json``: the generated catalogue of every entry, deterministic and drift-checked."""

from __future__ import annotations

import json
from pathlib import Path

from .fsutil import atomic_write, folder_digest
from .loader import Entry, Library
from .models import IndexEntry, ReadsetSummary, SkillIndex
from .validate import readset_evidence

INDEX_FILE = Path("skill-index.json")
INDEX_SCHEMA_REF = "schemas/skill-index.schema.json"


def index_entry(entry: Entry, library: Library) -> IndexEntry:
    meta = entry.meta
    assert meta is not None
    return IndexEntry(
        id=entry.id,
        name=entry.name,
        title=meta.title,
        title_zh=meta.title_zh,
        description=entry.description,
        tier=meta.tier,
        owner=meta.owner,
        status=meta.status.state,
        status_reason=meta.status.reason,
        validation=meta.empirical_validation.state,
        version_anchors={k: v for k, v in meta.version_anchors if v is not None},
        readsets=[
            ReadsetSummary(
                repo=r.repo,
                commit=r.commit,
                tag=r.tag,
                files=len(r.files),
                evidence=readset_evidence(library.manifests, r),
            )
            for r in meta.readsets
        ],
        cross_refs=sorted(meta.cross_refs, key=lambda x: (x.relation.value, x.id)),
        keywords=meta.keywords,
        path=entry.skill_path,
        references=sorted(f"{entry.id}/references/{name}" for name in entry.references),
        digest=folder_digest(entry.folder),
    )


def build_index(library: Library) -> SkillIndex:
    entries = [index_entry(e, library) for e in library.sorted_entries() if e.meta is not None]
    return SkillIndex(**{"$schema": INDEX_SCHEMA_REF}, entries=entries)


def render_index(index: SkillIndex) -> bytes:
    data = index.model_dump(mode="json", by_alias=True)
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def write_index(library: Library) -> bool:
    return atomic_write(library.root / INDEX_FILE, render_index(build_index(library)))


def index_drift(library: Library) -> list[str]:
    """Entry ids whose committed index record differs from a fresh build ('(file)' when unreadable)."""
    path = library.root / INDEX_FILE
    fresh = json.loads(render_index(build_index(library)))
    try:
        committed = json.loads(path.read_text(encoding="utf-8"))
        old = {e["id"]: e for e in committed["entries"]}
    except (OSError, ValueError, KeyError, TypeError):
        return ["(skill-index.json is missing or unreadable)"]
    new = {e["id"]: e for e in fresh["entries"]}
    changed = sorted(k for k in new.keys() | old.keys() if new.get(k) != old.get(k))
    if not changed and path.read_bytes() != render_index(build_index(library)):
        changed = ["(formatting)"]
    return changed
