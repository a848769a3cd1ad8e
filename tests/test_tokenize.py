"""The shared tokeniser: identifiers whole and split, Chinese segmented with bigram fallback."""

from __future__ import annotations

import pytest

from skillkb.tokenize import tokenize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("torch_npu", {"torch_npu", "torch", "npu"}),
        ("PYTORCH_NPU_ALLOC_CONF", {"pytorch_npu_alloc_conf", "pytorch", "npu", "alloc", "conf"}),
        ("AclmdlRICaptureBegin", {"aclmdlricapturebegin", "aclmdl", "ri", "capture", "begin"}),
        ("expandable_segments:True", {"expandable_segments:true", "expandable", "segment", "true"}),
        ("error code is 207008", {"error", "code", "207008"}),
        ("vllm_ascend.compilation.acl_graph", {"vllm_ascend.compilation.acl_graph", "vllm", "ascend", "acl", "graph"}),
    ],
)
def test_identifiers_kept_whole_and_split(text: str, expected: set[str]) -> None:
    assert expected <= set(tokenize(text))


def test_case_folding_and_plural_fold() -> None:
    assert "graph" in tokenize("Graphs") and "graph" in tokenize("GRAPH")


def test_stopwords_dropped() -> None:
    assert tokenize("what is the") == []
    assert "的" not in tokenize("显存的碎片")


def test_chinese_words_and_bigrams() -> None:
    tokens = tokenize("图捕获失败")
    assert "捕获" in tokens  # a dictionary word
    assert "图捕" in tokens  # a character bigram: the fallback for unknown words
    assert "锁页" in tokenize("锁页内存")


def test_mixed_script() -> None:
    tokens = tokenize("ACLGraph 图捕获 207008")
    assert {"aclgraph", "207008", "捕获"} <= set(tokens)


@pytest.mark.parametrize("text", ["", "   ", "！？。，", "...---", "\x00\x01", "\ud800 broken"])
def test_degenerate_input_gives_no_tokens_or_few(text: str) -> None:
    tokens = tokenize(text)
    assert all(isinstance(t, str) and t for t in tokens)
