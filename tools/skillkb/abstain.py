"""The "nothing relevant" decision: small logistic models over query features, fitted on dev cases.

Features: the lexical (BM25) confidence, the dense top cosine (0 for lexical-only retrievers), the
IDF-weighted share of the query the top entry contains, the share of query tokens the corpus has never
seen, whether the query names another accelerator stack without naming this library's, whether it names
this stack's vocabulary at all, whether the top entry's triage signatures match, whether the query names a
topic the library does not cover (``schemas/retrieval-scope.yaml``), the top entry's margin over the
second, and the query classifier's probability that no entry answers (the combined ranker only).

There are two ways to have no answer, and one linear boundary cannot draw both: a question about another
domain altogether (an nginx error, a CUDA build) and an in-domain question the library does not cover
(tool calling on vllm-ascend). So the model has one logistic *part* per kind, each fitted to tell in-scope
dev questions from that kind's dev negatives, and the search abstains when any part falls below its
threshold. ``skillkb eval --calibrate`` fits the parts and picks the thresholds that abstain most while
keeping false abstention on dev within bound in every case set; the test splits check it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .signals import Lexicon

FEATURES = (
    "lexical",
    "dense",
    "matched_share",
    "unknown_share",
    "unknown_latin_share",
    "foreign_only",
    "domain_term",  # the query names this stack's vocabulary (domain_terms)
    "signature",
    "uncovered_topic",
    "margin",
    "no_entry",  # the query classifier's p(no entry), trained on the in-domain uncovered dev questions
    "bias",
)


def features(
    tokens: list[str],
    vocab: dict[str, int],
    lexical: float,
    dense: float,
    matched: float,
    lexicon: Lexicon,
    signature: float = 0.0,
    margin: float = 1.0,
    folded: str = "",
    no_entry: float = 0.0,
) -> list[float]:
    """The abstention features of one query, in the order of ``FEATURES``.

    ``signature``: the top entry's error-signature evidence; ``uncovered_topic``: the query names a topic
    the library knows it does not cover (``schemas/retrieval-scope.yaml``); ``margin``: how far the top
    entry stands above the second (0 = a tie); ``no_entry``: the query classifier's probability that no
    entry answers (0 without a classifier)."""
    unique = set(tokens)
    unknown = sum(t not in vocab for t in unique) / len(unique) if unique else 1.0
    # Chinese bigrams are almost always known; unknown Latin words (product names) say more about scope.
    latin = [t for t in unique if t.isascii()]
    unknown_latin = sum(t not in vocab for t in latin) / len(latin) if latin else 0.0
    foreign_only = float(bool(unique & lexicon.foreign) and not (unique & lexicon.domain))
    uncovered = float(any(term in folded for term in lexicon.uncovered))
    # Confidences live around 0.0-0.3; scale them so one regularisation strength suits every feature.
    return [
        10.0 * lexical,
        2.0 * dense,
        matched,
        unknown,
        unknown_latin,
        foreign_only,
        float(bool(unique & lexicon.domain)),
        min(signature, 2.0),
        uncovered,
        margin,
        no_entry,
        1.0,
    ]


@dataclass
class Part:
    """One logistic boundary: p(in scope) from the features; below ``threshold`` the part abstains."""

    name: str
    weights: list[float] = field(default_factory=lambda: [0.0] * len(FEATURES))
    threshold: float = 0.0  # 0 never abstains

    def probability(self, x: list[float]) -> float:
        z = sum(w * v for w, v in zip(self.weights, x, strict=True))
        return 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "weights": [round(w, 6) for w in self.weights],
            "threshold": round(self.threshold, 6),
        }


@dataclass
class AbstentionModel:
    parts: list[Part] = field(default_factory=list)

    def probability(self, x: list[float]) -> float:
        """The least confident part's p(in scope): the one that decides."""
        return min((part.probability(x) for part in self.parts), default=1.0)

    def abstains(self, x: list[float]) -> bool:
        return any(part.probability(x) < part.threshold for part in self.parts)

    def to_json(self) -> dict:
        return {"features": list(FEATURES), "parts": [part.to_json() for part in self.parts]}

    @classmethod
    def from_json(cls, data: dict) -> AbstentionModel:
        return cls(
            [Part(str(p["name"]), [float(w) for w in p["weights"]], float(p["threshold"])) for p in data["parts"]]
        )

    def fits_features(self) -> bool:
        return all(len(part.weights) == len(FEATURES) for part in self.parts)


def fit_part(
    name: str,
    samples: list[tuple[list[float], bool]],
    steps: int = 3000,
    rate: float = 0.5,
    l2: float = 0.01,
) -> Part:
    """Class-balanced logistic regression by gradient descent (the bias, last, is not regularised)."""
    positives = sum(1 for _, y in samples if y) or 1
    negatives = sum(1 for _, y in samples if not y) or 1
    part = Part(name)
    for _ in range(steps):
        grad = [0.0] * len(part.weights)
        for x, y in samples:
            weight = 0.5 / positives if y else 0.5 / negatives
            error = part.probability(x) - (1.0 if y else 0.0)
            for i, v in enumerate(x):
                grad[i] += weight * error * v
        part.weights = [
            w - rate * (g + l2 * w * (i < len(part.weights) - 1))
            for i, (w, g) in enumerate(zip(part.weights, grad, strict=True))
        ]
    return part


THRESHOLD_GRID = tuple(i / 50 for i in range(50))  # candidate thresholds per part, 0 (never) to 0.98


def fit(
    samples: list[tuple[list[float], bool]],
    max_false_abstention: float = 0.05,
    groups: list[str] | None = None,
    kinds: dict[str, str] | None = None,
) -> AbstentionModel:
    """One part per kind of negative, then the thresholds.

    ``groups`` names each sample's case set (authored, real); ``kinds`` maps a set to the name of the part
    its negatives train (default: one part for all). Every part learns in-scope samples of every set against
    its own negatives. The thresholds are the grid point that abstains on the largest mean share of negatives
    (averaged over the parts) while false abstention stays within bound in every set, so a large easy set
    cannot hide a small hard one."""
    labels = groups or [""] * len(samples)
    kind_of = kinds or {}
    names = sorted({kind_of.get(g, "in-scope") for (_, y), g in zip(samples, labels, strict=True) if not y})
    positives = [x for x, y in samples if y]
    parts = []
    for name in names or ["in-scope"]:
        negatives = [
            x for (x, y), g in zip(samples, labels, strict=True) if not y and kind_of.get(g, "in-scope") == name
        ]
        parts.append(fit_part(name, [(x, True) for x in positives] + [(x, False) for x in negatives]))
    model = AbstentionModel(parts)
    probabilities = [[part.probability(x) for part in parts] for x, _ in samples]
    best: tuple[float, tuple[float, ...]] = (-1.0, tuple(0.0 for _ in parts))
    for thresholds in product(THRESHOLD_GRID, repeat=len(parts)):
        abstains = [any(p < t for p, t in zip(ps, thresholds, strict=True)) for ps in probabilities]
        if not _within_bound(abstains, samples, labels, max_false_abstention):
            continue
        caught = []
        for part in parts:
            own = [
                a
                for a, (_, y), g in zip(abstains, samples, labels, strict=True)
                if not y and kind_of.get(g, "in-scope") == part.name
            ]
            caught.append(sum(own) / len(own) if own else 0.0)
        score = sum(caught) / len(caught)
        if score > best[0] + 1e-12:
            best = (score, thresholds)
    for part, threshold in zip(parts, best[1], strict=True):
        part.threshold = threshold
    return model


def _within_bound(abstains: list[bool], samples: list, labels: list[str], bound: float) -> bool:
    for group in set(labels):
        in_scope = [a for a, (_, y), g in zip(abstains, samples, labels, strict=True) if y and g == group]
        if in_scope and sum(in_scope) > math.floor(bound * len(in_scope)):
            return False
    return True
