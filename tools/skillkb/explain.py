"""``skillkb search --explain``: why a query went where it did.

For every hit: which query terms matched which indexed fields of the entry (card: title, description,
keywords; section: heading, body), the terms that contributed most to the BM25 score of the hit's
document, and the abstention features with the model's weights, probability and threshold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .abstain import FEATURES, AbstentionModel
from .tokenize import tokenize

if TYPE_CHECKING:
    from .retrieval import Hit, SearchEngine


def _doc_index(engine: SearchEngine, hit: Hit) -> int | None:
    for i, doc in enumerate(engine.docs):
        if doc.entry_id == hit.id and doc.section == hit.section and doc.path == hit.path:
            return i
    return None


def token_scores(engine: SearchEngine, doc_index: int, tokens: list[str]) -> dict[str, float]:
    """Each distinct query token's BM25 contribution to one document (tokens it lacks are left out)."""
    index = engine.bm25
    out: dict[str, float] = {}
    for token in sorted(set(tokens)):
        tid = index.vocab.get(token)
        if tid is None:
            continue
        start, end = int(index.indptr[tid]), int(index.indptr[tid + 1])
        for pos in range(start, end):
            if int(index.indices[pos]) == doc_index:
                out[token] = round(float(index.data[pos]) * tokens.count(token), 4)
    return out


def field_matches(engine: SearchEngine, entry_id: str, section: str, tokens: set[str]) -> dict[str, list[str]]:
    """Query tokens found in each field of the entry's card and of the hit's section."""
    matched: dict[str, list[str]] = {}
    for doc in engine.docs:
        if doc.entry_id != entry_id or (doc.kind == "section" and doc.section != section):
            continue
        for name, text in doc.fields.items():
            found = sorted(tokens & set(tokenize(text)))
            if found:
                matched[f"{doc.kind}.{name}"] = found
    return matched


def explain_result(
    engine: SearchEngine, tokens: list[str], hits: list[Hit], features: list[float], model: AbstentionModel | None
) -> dict:
    unique = set(tokens)
    known = sorted(t for t in unique if t in engine.bm25.vocab)
    hit_rows = []
    for hit in hits:
        index = _doc_index(engine, hit)
        scores = token_scores(engine, index, tokens) if index is not None else {}
        hit_rows.append(
            {
                "id": hit.id,
                "section": hit.section,
                "score": round(hit.score, 4),
                "fields": field_matches(engine, hit.id, hit.section, unique),
                "top_terms": dict(sorted(scores.items(), key=lambda kv: -kv[1])[:8]),
            }
        )
    abstention = {"features": dict(zip(FEATURES, (round(v, 4) for v in features), strict=True))}
    if model is not None:
        abstention |= {
            "weights": dict(zip(FEATURES, (round(w, 4) for w in model.weights), strict=True)),
            "probability_in_scope": round(model.probability(features), 4),
            "threshold": round(model.threshold, 4),
            "abstains": model.abstains(features),
        }
    return {
        "query_tokens": sorted(unique),
        "unknown_tokens": sorted(unique - set(known)),
        "hits": hit_rows,
        "abstention": abstention,
    }


def render(explanation: dict) -> str:
    lines = ["", "explain:", f"  query tokens: {' '.join(explanation['query_tokens'])}"]
    if explanation["unknown_tokens"]:
        lines.append(f"  not in the library's vocabulary: {' '.join(explanation['unknown_tokens'])}")
    for row in explanation["hits"]:
        lines.append(f"  {row['id']} § {row['section']} (score {row['score']})")
        for name, found in row["fields"].items():
            lines.append(f"    {name}: {' '.join(found)}")
        if row["top_terms"]:
            lines.append("    top terms: " + ", ".join(f"{t} {v}" for t, v in row["top_terms"].items()))
    ab = explanation["abstention"]
    lines.append("  abstention features: " + ", ".join(f"{k}={v}" for k, v in ab["features"].items()))
    if "probability_in_scope" in ab:
        verdict = "abstains" if ab["abstains"] else "answers"
        lines.append(f"  p(in scope) {ab['probability_in_scope']} vs threshold {ab['threshold']}: {verdict}")
    return "\n".join(lines)
