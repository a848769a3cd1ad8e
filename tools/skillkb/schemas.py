"""JSON Schemas generated from the pydantic models (the models are the single source of truth)."""

from __future__ import annotations

import json
from pathlib import Path

from .fsutil import atomic_write
from .models import SCHEMA_MODELS

SCHEMA_DIR = Path("schemas")
DIALECT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://skillkb.invalid/schemas/"


def schema_for(filename: str) -> dict:
    model = SCHEMA_MODELS[filename]
    schema = model.model_json_schema(by_alias=True)
    return {"$schema": DIALECT, "$id": BASE_ID + filename, **schema}


def render(filename: str) -> bytes:
    return (json.dumps(schema_for(filename), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def write_schemas(root: Path) -> list[str]:
    return [name for name in sorted(SCHEMA_MODELS) if atomic_write(root / SCHEMA_DIR / name, render(name))]


def stale_schemas(root: Path) -> list[str]:
    """Schema files that differ from what the models generate."""
    stale = []
    for name in sorted(SCHEMA_MODELS):
        path = root / SCHEMA_DIR / name
        if not path.exists() or path.read_bytes() != render(name):
            stale.append(name)
    return stale
