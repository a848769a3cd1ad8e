"""The tokeniser shared by index and query.

- Text is NFKC-normalised and case-folded.
- Identifiers are kept whole *and* split into parts: ``torch_npu`` → ``torch_npu``, ``torch``, ``npu``;
  ``PYTORCH_NPU_ALLOC_CONF`` and ``expandable_segments:True`` likewise; CamelCase is split too
  (``AclmdlRICaptureBegin`` → ``aclmdl``, ``ri``, ``capture``, ``begin``); error codes (``207008``) stay whole.
- Chinese runs are segmented with rjieba (jieba's search mode, so long words also yield their parts),
  plus character bigrams as a fallback for words the dictionary does not know.
- A small stop-word list drops function words in both languages.
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

IDENTIFIER = re.compile(r"[A-Za-z0-9]+(?:[_.:/\-=][A-Za-z0-9]+)*")
HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
PART_SPLIT = re.compile(r"[_.:/\-=]+")

STOPWORDS_EN = frozenset(
    """a an and are as at be been but by can do does for from has have how i if in into is it its me my no not
    of on or our so that the their then there these they this to was we what when where which while who why
    will with you your""".split()
)
STOPWORDS_ZH = frozenset(
    """的 了 是 在 和 与 或 及 就 都 也 还 又 把 被 让 给 对 从 到 为 以 之 于 而 等 个 这 那 我 你 他 它 吗 呢 吧 啊
    怎么 什么 如何 为什么 一个 没有 可以 时候""".split()
)
TOKENIZER_VERSION = "1"


def query_language(text: str) -> str:
    """Which language's weights rank ``text``: zh when it has any Chinese in it (a mixed question too: its
    Chinese words usually carry the problem, the English ones are names and log lines), else en."""
    return "zh" if HAN_RUN.search(text) else "en"


def _stem(word: str) -> str:
    """A deliberately light English plural fold: 'graphs' → 'graph', 'caches' → 'cache'."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and word.isalpha():
        return word[:-1]
    return word


@lru_cache(maxsize=1)
def _jieba():
    import rjieba

    return rjieba


def _identifier_tokens(raw: str) -> list[str]:
    whole = raw.casefold()
    tokens = [whole] if len(whole) > 1 or whole.isdigit() else []
    parts = [p for p in PART_SPLIT.split(raw) if p]
    pieces = []
    for part in parts:
        camel = CAMEL.findall(part)
        pieces.extend(camel if len(camel) > 1 else [part])
        if len(camel) > 1:
            pieces.append(part)
    for piece in pieces:
        folded = piece.casefold()
        if folded != whole and folded not in STOPWORDS_EN and (len(folded) > 1 or folded.isdigit()):
            tokens.append(_stem(folded))
    if len(parts) == 1 and tokens and tokens[0] == whole:
        tokens[0] = _stem(whole)
    return [t for t in tokens if t not in STOPWORDS_EN]


def _han_tokens(run: str) -> list[str]:
    words = [w for w in _jieba().cut_for_search(run) if w.strip() and w not in STOPWORDS_ZH]
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    singles = [run] if len(run) == 1 and run not in STOPWORDS_ZH else []
    return words + [b for b in bigrams if b not in words] + singles


def tokenize(text: str) -> list[str]:
    """Tokens for BM25, in text order (duplicates kept: term frequency matters)."""
    text = unicodedata.normalize("NFKC", text)
    tokens: list[str] = []
    pos = 0
    for match in HAN_RUN.finditer(text):
        for ident in IDENTIFIER.findall(text[pos : match.start()]):
            tokens.extend(_identifier_tokens(ident))
        tokens.extend(_han_tokens(match.group(0)))
        pos = match.end()
    for ident in IDENTIFIER.findall(text[pos:]):
        tokens.extend(_identifier_tokens(ident))
    return tokens


def estimate_tokens(text: str) -> int:
    """Rough LLM token count: ~4 chars per token for ASCII, ~1 per CJK character."""
    cjk = sum(1 for ch in text if ord(ch) > 0x2E80)
    return math.ceil((len(text) - cjk) / 4 + cjk)
