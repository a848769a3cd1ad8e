"""Tier boundaries, admission gates and section order, read from ``schemas/tier-rules.yaml``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

RULES_FILE = Path("schemas/tier-rules.yaml")


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
    covered_evidence: tuple[str, ...] = ("verified",)  # readset evidence levels the covered gate accepts

    def gate_for(self, tier: int, state: str) -> Gate:
        if state == "covered":
            return self.covered_tier1 if tier == 1 else self.covered_canonical
        if state == "to-refine" and tier == 1:
            return self.covered_tier1
        return self.neighbour


def load_rules(root: Path) -> Rules:
    raw = yaml.safe_load((root / RULES_FILE).read_text(encoding="utf-8"))
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
    gates = raw["gates"]
    return Rules(
        tiers=tiers,
        covered_canonical=Gate(**gates["covered"]["canonical"]),
        covered_tier1=Gate(**gates["covered"]["tier1"]),
        neighbour=Gate(**gates["neighbour"]),
        sections=tuple(raw["sections"]),
        skill_md_bytes=int(raw["limits"]["skill_md_bytes"]),
        skill_md_lines=int(raw["limits"]["skill_md_lines"]),
        covered_evidence=tuple(gates["covered"].get("evidence") or ("verified",)),
    )
