"""Dense retrieval: both offline embedders load, the cache is keyed by content, hybrid fuses with RRF."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from skillkb.retrieval import (
    RRF_K,
    EmbeddingCache,
    HybridRanker,
    SearchEngine,
    SentenceTransformerEmbedder,
    USEEmbedder,
)

from conftest import REPO_ROOT

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def use() -> USEEmbedder:
    return USEEmbedder()


def test_minilm_loads_from_the_package_offline(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.encode(["graph capture fails", "stream resources exhausted during capture", "banana bread"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_use_is_multilingual(use: USEEmbedder) -> None:
    vectors = use.encode(["图捕获失败", "graph capture failed", "香蕉面包的做法"])
    assert vectors.shape == (3, 512)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


class CountingEmbedder:
    key = "counting:v1"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        rng = np.random.default_rng(len(texts))
        vectors = rng.normal(size=(len(texts), 8)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_embedding_cache_encodes_each_text_once(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    cache = EmbeddingCache(tmp_path, embedder)
    first = cache.encode(["a", "b", "a"], progress=False)
    second = EmbeddingCache(tmp_path, embedder).encode(["b", "a", "c"], progress=False)
    assert sorted(embedder.seen) == ["a", "b", "c"]
    assert np.array_equal(first[0], second[1]) and np.array_equal(first[1], second[0])


def test_hybrid_is_reciprocal_rank_fusion() -> None:
    engine = SearchEngine.open(REPO_ROOT, use_cache=False)
    hybrid = engine.ranker("hybrid")
    assert isinstance(hybrid, HybridRanker)
    query = "stream resources are insufficient while capturing graphs"
    ranking = hybrid.rank(query)
    lexical = [engine.docs[i].entry_id for i, _ in engine.bm25.rank(query).order]
    dense = [engine.docs[i].entry_id for i, _ in hybrid.dense.rank(query).order]
    first = lambda ids: list(dict.fromkeys(ids))  # noqa: E731 - keep order, drop repeats
    top_id = engine.docs[ranking.order[0][0]].entry_id
    expected = hybrid.weights[0] / (RRF_K + first(lexical).index(top_id) + 1) + hybrid.weights[1] / (
        RRF_K + first(dense).index(top_id) + 1
    )
    assert ranking.order[0][1] == pytest.approx(expected)
    assert 0.0 < ranking.dense_top <= 1.0
