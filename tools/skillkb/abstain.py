"""The "nothing relevant" decision: a small logistic model over query features, fitted on dev cases.

Features: the lexical (BM25) confidence, the dense top cosine (0 for lexical-only retrievers), the
IDF-weighted share of the query the top entry contains, the share of query tokens the corpus has never
seen, and whether the query names another accelerator stack without naming this library's
(``schemas/retrieval-scope.yaml``).
``skillkb eval --calibrate`` fits the weights on the dev split and picks the probability threshold that
keeps false abstention on dev within bound; the test split checks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

SCOPE_FILE = Path("schemas/retrieval-scope.yaml")
FEATURES = (
    "lexical",
    "dense",
    "matched_share",
    "unknown_share",
    "unknown_latin_share",
    "foreign_only",
    "domain_term",
    "bias",
)


@lru_cache(maxsize=4)
def scope_terms(root: Path) -> tuple[frozenset[str], frozenset[str]]:
    path = root / SCOPE_FILE
    if not path.exists():
        return frozenset(), frozenset()
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return frozenset(map(str.lower, raw["domain_terms"])), frozenset(map(str.lower, raw["foreign_terms"]))


def features(
    tokens: list[str], vocab: dict[str, int], lexical: float, dense: float, matched: float, root: Path
) -> list[float]:
    unique = set(tokens)
    domain, foreign = scope_terms(root)
    unknown = sum(t not in vocab for t in unique) / len(unique) if unique else 1.0
    # Chinese bigrams are almost always known; unknown Latin words (product names) say more about scope.
    latin = [t for t in unique if t.isascii()]
    unknown_latin = sum(t not in vocab for t in latin) / len(latin) if latin else 0.0
    foreign_only = float(bool(unique & foreign) and not (unique & domain))
    # Confidences live around 0.0-0.3; scale them so one regularisation strength suits every feature.
    return [
        10.0 * lexical,
        2.0 * dense,
        matched,
        unknown,
        unknown_latin,
        foreign_only,
        float(bool(unique & domain)),
        1.0,
    ]


@dataclass
class AbstentionModel:
    weights: list[float] = field(default_factory=lambda: [0.0] * len(FEATURES))
    threshold: float = 0.0  # abstain when p(in scope) < threshold; 0 never abstains

    def probability(self, x: list[float]) -> float:
        z = sum(w * v for w, v in zip(self.weights, x, strict=True))
        return 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))

    def abstains(self, x: list[float]) -> bool:
        return self.probability(x) < self.threshold

    def to_json(self) -> dict:
        return {
            "features": list(FEATURES),
            "weights": [round(w, 6) for w in self.weights],
            "threshold": round(self.threshold, 6),
        }

    @classmethod
    def from_json(cls, data: dict) -> AbstentionModel:
        return cls(list(data["weights"]), float(data["threshold"]))


def fit(
    samples: list[tuple[list[float], bool]],
    max_false_abstention: float = 0.05,
    steps: int = 3000,
    rate: float = 0.5,
    l2: float = 0.01,
) -> AbstentionModel:
    """Class-balanced logistic regression by gradient descent, then the highest safe threshold."""
    positives = sum(1 for _, y in samples if y) or 1
    negatives = sum(1 for _, y in samples if not y) or 1
    weights = [0.0] * len(FEATURES)
    model = AbstentionModel(weights)
    for _ in range(steps):
        grad = [0.0] * len(weights)
        for x, y in samples:
            weight = 0.5 / positives if y else 0.5 / negatives
            error = model.probability(x) - (1.0 if y else 0.0)
            for i, v in enumerate(x):
                grad[i] += weight * error * v
        model.weights = [
            w - rate * (g + l2 * w * (i < len(weights) - 1))
            for i, (w, g) in enumerate(zip(model.weights, grad, strict=True))
        ]
    in_scope = sorted(model.probability(x) for x, y in samples if y)
    allowed = math.floor(max_false_abstention * len(in_scope))
    model.threshold = max(in_scope[allowed] - 1e-6, 0.0) if in_scope else 0.0
    return model
