"""Tier boundaries, admission gates and section order, read from ``schemas/tier-rules.yaml``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .diagnostics import Diagnostic

RULES_FILE = Path("schemas/tier-rules.yaml")


class RulesProblem(Exception):
    """``schemas/tier-rules.yaml`` cannot be read; nothing can be validated without it."""

    def __init__(self, message: str, line: int | None = None, field: str = ""):
        self.diagnostic = Diagnostic(
            RULES_FILE.as_posix(),
            line,
            "rules-invalid",
            field,
            message,
            "restore schemas/tier-rules.yaml from git (`git checkout -- schemas/tier-rules.yaml`) or fix the field",
        )
        super().__init__(self.diagnostic.render())


@dataclass(frozen=True)
class TierRule:
    tier: int
    label: str
    owners: tuple[str, ...]
    required_anchors: tuple[str, ...]
    forbidden_terms: tuple[re.Pattern[str], ...]


@dataclass(frozen=True)
class Gate:
    cited_facts: int
    triage_rows: int
    eval_cases: int


@dataclass(frozen=True)
class Rules:
    tiers: dict[int, TierRule]
    covered_canonical: Gate
    covered_tier1: Gate
    neighbour: Gate
    sections: tuple[str, ...]
    skill_md_bytes: int
    skill_md_lines: int
    skill_md_tokens: int = 5500  # an agent loads the body whole: keep it near the spec's 5,000 tokens
    covered_evidence: tuple[str, ...] = ("verified",)  # readset evidence levels the covered gate accepts

    def gate_for(self, tier: int, state: str) -> Gate:
        if state == "covered":
            return self.covered_tier1 if tier == 1 else self.covered_canonical
        if state == "to-refine" and tier == 1:
            return self.covered_tier1
        return self.neighbour


def load_rules(root: Path) -> Rules:
    """The rules, or ``RulesProblem`` naming what is wrong with the file."""
    from .yamlsrc import YamlProblem, parse_yaml

    path = root / RULES_FILE
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8")).data
    except OSError as exc:
        raise RulesProblem(f"cannot read the tier rules: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise RulesProblem("the tier rules are not UTF-8 text") from None
    except YamlProblem as exc:
        raise RulesProblem(str(exc), exc.line) from None
    if raw is None:
        raise RulesProblem("the tier rules file is empty (no tiers, gates, sections or limits)")
    if not isinstance(raw, dict):
        raise RulesProblem(
            f"the tier rules are a {type(raw).__name__}, not a mapping of tiers, gates, sections, limits"
        )
    try:
        return _rules_from(raw)
    except (KeyError, TypeError, ValueError, AttributeError, re.error) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise RulesProblem(f"the tier rules do not have the expected shape: {what}") from None


def _rules_from(raw: dict) -> Rules:
    tiers = {
        int(number): TierRule(
            tier=int(number),
            label=spec["label"],
            owners=tuple(spec["owners"]),
            required_anchors=tuple(spec["required_anchors"]),
            forbidden_terms=tuple(re.compile(term, re.IGNORECASE) for term in spec.get("forbidden_terms") or []),
        )
        for number, spec in raw["tiers"].items()
    }
    if set(tiers) != {1, 2, 3}:
        raise ValueError(f"'tiers' must define tiers 1, 2 and 3, found {sorted(tiers)}")
    if not all(isinstance(s, str) for s in raw["sections"]):
        raise ValueError("'sections' must be a list of heading texts")
    gates = raw["gates"]
    return Rules(
        tiers=tiers,
        covered_canonical=Gate(**gates["covered"]["canonical"]),
        covered_tier1=Gate(**gates["covered"]["tier1"]),
        neighbour=Gate(**gates["neighbour"]),
        sections=tuple(raw["sections"]),
        skill_md_bytes=int(raw["limits"]["skill_md_bytes"]),
        skill_md_lines=int(raw["limits"]["skill_md_lines"]),
        skill_md_tokens=int(raw["limits"].get("skill_md_tokens", 5500)),
        covered_evidence=tuple(gates["covered"].get("evidence") or ("verified",)),
    )
