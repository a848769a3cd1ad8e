"""The JSON Schemas in schemas/ are generated from the models and agree with them on real files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from skillkb.models import SCHEMA_MODELS, EntryMeta
from skillkb.schemas import DIALECT, render, stale_schemas

from conftest import REPO_ROOT


def test_committed_schemas_match_models() -> None:
    assert stale_schemas(REPO_ROOT) == [], "run `skillkb schemas` and commit the result"


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_schema_declares_draft_2020_12(name: str) -> None:
    schema = json.loads(render(name))
    assert schema["$schema"] == DIALECT
    jsonschema.Draft202012Validator.check_schema(schema)


def entry_yaml_files() -> list[Path]:
    return sorted(p for top in ("hardware", "repositories") for p in (REPO_ROOT / top).rglob("entry.yaml"))


def test_json_schema_and_model_agree_on_every_entry() -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "entry.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    files = entry_yaml_files()
    assert files, "the library has entries"
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert list(validator.iter_errors(data)) == [], path
        EntryMeta.model_validate(data)


def test_json_schema_rejects_what_the_model_rejects() -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "entry.schema.json").read_text())
    data = yaml.safe_load(entry_yaml_files()[0].read_text(encoding="utf-8"))
    broken = {**data, "readsets": [{**data["readsets"][0], "commit": "9bf964c"}]} if data["readsets"] else None
    for bad in filter(None, [{**data, "tier": 4}, {**data, "unknown": 1}, broken]):
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
        with pytest.raises(ValueError):
            EntryMeta.model_validate(bad)


def test_index_file_validates_against_its_schema() -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "skill-index.schema.json").read_text())
    index = json.loads((REPO_ROOT / "skill-index.json").read_text())
    assert index["$schema"] == "schemas/skill-index.schema.json"
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(index)) == []


def test_eval_cases_validate_against_their_schema() -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "eval-case.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    lines = (REPO_ROOT / "evals" / "retrieval" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        assert list(validator.iter_errors(json.loads(line))) == [], line
