"""A learned query → entry signal: multinomial logistic regression over the cleaned, weighted query tokens.

BM25 and the signatures only see words the entries share with the question; many real questions name the
symptom in words no entry uses ("显存占用 22GB" is vLLM's KV budget, not the allocator). A linear model
trained on labelled dev questions learns those words. It is one more signal of the combined ranker, not a
replacement, and its weight is fitted on out-of-fold probabilities, so a dev question cannot vouch for the
model that was trained on it (``evaluation.fit_classifier``).

Training rows: the entries' phrasings, the training questions of ``evals/retrieval/training/`` (each at its
origin's row weight) and every labelled dev question (authored and real; an ``expected: []`` question is a
row of the class ``NO_ENTRY``). Fitting uses numpy on a sparse design matrix; scoring a query is plain
Python (a few dozen rows of a small matrix), so a search process imports neither numpy, torch nor
scikit-learn for it.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

NO_ENTRY = "(none)"  # the class of in-domain questions no entry answers
DEFAULT_L2 = 0.0005  # mean cross-entropy + l2/2 * |W|^2; 5-fold cross-fitting on dev (bench/bench_learned.py)
ITERATIONS = 1500  # enough to converge at that l2: 400 left real-dev Hit@1 of the model alone 3 points lower


@dataclass
class Example:
    tokens: list[str]
    weights: list[float]
    label: str
    row_weight: float = 1.0  # how much this row counts in the loss (evaluation.TRAINING_WEIGHTS)


@dataclass
class QueryClassifier:
    """Weights per (token, class) and a bias per class; tokens it never saw contribute nothing. The weights
    are float16 values (what the calibration file stores), so a fitted model and a loaded one score alike."""

    vocab: dict[str, int]
    classes: list[str]
    weights: list[float]  # row-major (len(vocab) x len(classes))
    bias: list[float]

    def _row(self, token: str) -> list[float] | None:
        row = self.vocab.get(token)
        width = len(self.classes)
        return None if row is None else self.weights[row * width : (row + 1) * width]

    def probabilities(self, tokens: list[str], token_weights: list[float]) -> dict[str, float]:
        logits = list(self.bias)
        for token, weight in _presence(tokens, token_weights).items():
            row = self._row(token)
            if row is not None:
                logits = [z + weight * w for z, w in zip(logits, row, strict=True)]
        top = max(logits)
        exps = [math.exp(z - top) for z in logits]
        total = sum(exps)
        return {label: e / total for label, e in zip(self.classes, exps, strict=True)}

    def pushes(self, tokens: list[str], token_weights: list[float], label: str, top: int = 5) -> list[list]:
        """The query tokens that pushed hardest towards ``label`` (token, logit contribution), for --explain."""
        if label not in self.classes:
            return []
        column = self.classes.index(label)
        out = [
            [token, round(weight * row[column], 3)]
            for token, weight in _presence(tokens, token_weights).items()
            if (row := self._row(token)) is not None
        ]
        return sorted((p for p in out if p[1] > 0), key=lambda p: -p[1])[:top]

    @classmethod
    def fit(cls, examples: list[Example], l2: float = DEFAULT_L2, iterations: int = ITERATIONS) -> QueryClassifier:
        """Full-batch gradient descent with Nesterov momentum on the convex, regularised cross-entropy:
        deterministic, a few seconds for a thousand rows."""
        import numpy as np

        if not examples:
            raise ValueError("no training examples")
        classes = sorted({e.label for e in examples})
        vocab = {t: i for i, t in enumerate(sorted({t for e in examples for t in e.tokens}))}
        # The design matrix is very sparse (a query has a dozen tokens among thousands): keep it as
        # coordinate triples, so each product costs the non-zeros, not rows x vocabulary. Cells are summed
        # per row (in row order) and per token (in token order) with reduceat, much faster than add.at.
        cells = [(i, vocab[t], v) for i, e in enumerate(examples) for t, v in _presence(e.tokens, e.weights).items()]
        row_of = np.array([c[0] for c in cells], dtype=np.intp)
        col_of = np.array([c[1] for c in cells], dtype=np.intp)
        value = np.array([c[2] for c in cells])
        rows_present, row_starts = np.unique(row_of, return_index=True)
        by_col = np.argsort(col_of, kind="stable")
        col_starts = np.searchsorted(col_of[by_col], np.arange(len(vocab)))  # every token occurs at least once
        y = np.zeros((len(examples), len(classes)))
        y[np.arange(len(examples)), [classes.index(e.label) for e in examples]] = 1.0
        rows = np.array([e.row_weight for e in examples])
        rows = rows / rows.mean()  # mean 1: the l2 strength means the same whatever the row weights
        w, b = np.zeros((len(vocab), len(classes))), np.zeros(len(classes))
        vw, vb = np.zeros_like(w), np.zeros_like(b)
        squared = np.bincount(row_of, weights=value**2, minlength=len(examples))
        step = 1.0 / (float((squared * rows).max()) / 2 + l2)  # 1/L: a bound on the loss's curvature
        logits = np.zeros_like(y)
        for _ in range(iterations):
            lw, lb = w + 0.9 * vw, b + 0.9 * vb
            logits[rows_present] = np.add.reduceat(value[:, None] * lw[col_of], row_starts)
            error = (_softmax(logits + lb) - y) * rows[:, None] / len(examples)
            grad = np.add.reduceat((value[:, None] * error[row_of])[by_col], col_starts)
            vw = 0.9 * vw - step * (grad + l2 * lw)
            vb = 0.9 * vb - step * error.sum(axis=0)
            w, b = w + vw, b + vb
        packed = w.astype("<f2").tobytes()  # stored as float16: keep in memory exactly what is saved
        return cls(vocab, classes, _unpack(packed), [round(float(v), 4) for v in b])

    def to_json(self) -> dict:
        """Compact: the weight matrix as little-endian float16 in base64, a quarter of its size as text."""
        return {
            "classes": self.classes,
            "vocab": sorted(self.vocab, key=self.vocab.__getitem__),
            "bias": [round(float(v), 4) for v in self.bias],
            "weights_f16": base64.b64encode(struct.pack(f"<{len(self.weights)}e", *self.weights)).decode("ascii"),
        }

    @classmethod
    def from_json(cls, data: dict) -> QueryClassifier:
        """Raises ValueError (or KeyError / TypeError) on a malformed model; the caller reports it."""
        classes = [str(c) for c in data["classes"]]
        vocab = {str(t): i for i, t in enumerate(data["vocab"])}
        packed = base64.b64decode(data["weights_f16"], validate=True)
        size = len(packed) // 2
        if len(packed) % 2 or size != len(vocab) * len(classes) or len(data["bias"]) != len(classes) or not classes:
            raise ValueError(f"classifier holds {size} weights, not {len(vocab)} tokens x {len(classes)} classes")
        weights, bias = _unpack(packed), [float(v) for v in data["bias"]]
        if not all(math.isfinite(v) for v in weights + bias):
            raise ValueError("classifier weights are not all finite")
        return cls(vocab, classes, weights, bias)


def _presence(tokens: list[str], token_weights: list[float]) -> dict[str, float]:
    """Each distinct token once, at its largest weight: saying a word twice is not more evidence."""
    out: dict[str, float] = {}
    for token, weight in zip(tokens, token_weights, strict=True):
        out[token] = max(out.get(token, 0.0), float(weight))
    return out


def _unpack(packed: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(packed) // 2}e", packed))


def _softmax(logits: np.ndarray) -> np.ndarray:
    import numpy as np

    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)
