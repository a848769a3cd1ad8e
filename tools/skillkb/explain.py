"""``skillkb search --explain``: why a query went where it did.

The query as the ranker sees it (tokens kept at full weight, tokens down-weighted as noise, terms added by
zh↔en bridges). For every hit: which query terms matched which indexed fields of the entry (card: title,
description, keywords; section: heading, body), the terms that contributed most to the BM25 score of the
hit's document, the triage signatures the query contains, the entry's best-matching phrasing, and for the
combined ranker each signal with its weight and the query words that pushed the learned classifier towards
the entry. Then the abstention features with the model's weights, probability and threshold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .abstain import FEATURES, AbstentionModel
from .signals import BRIDGE_WEIGHT, NOISE_WEIGHT, WeightedQuery, fold, weighted_query
from .tokenize import query_language, tokenize

if TYPE_CHECKING:
    from .retrieval import CombinedRanker, Hit, SearchEngine


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
    for doc in engine.full_docs():
        if doc.entry_id != entry_id or (doc.kind == "section" and doc.section != section):
            continue
        for name, text in doc.fields.items():
            found = sorted(tokens & set(tokenize(text)))
            if found:
                matched[f"{doc.kind}.{name}"] = found
    return matched


def query_view(wq: WeightedQuery) -> dict:
    """The cleaned, weighted query: what counts fully, what counts as noise, what bridges added."""
    by_weight: dict[float, list[str]] = {}
    for token, weight in zip(wq.tokens, wq.weights, strict=True):
        by_weight.setdefault(weight, []).append(token)
    return {
        "cleaned": wq.folded,
        "full_weight": sorted(set(by_weight.get(1.0, []))),
        "noise": sorted(set(by_weight.get(NOISE_WEIGHT, []))),
        "bridged": sorted(set(by_weight.get(BRIDGE_WEIGHT, []))),
    }


def best_phrases(engine: SearchEngine, wq: WeightedQuery) -> dict[str, str]:
    """Per entry, its phrasing that matches the query best (entries with no matching phrase are left out)."""
    index = engine.phrases
    if index.bm25 is None:
        return {}
    scores = index.bm25.scores(wq.tokens, wq.weights)
    best: dict[str, int] = {}
    for i, owner in enumerate(index.owners):
        if scores[i] > 0 and (owner not in best or scores[i] > scores[best[owner]]):
            best[owner] = i
    return {owner: index.texts[i] for owner, i in best.items()}


def explain_result(
    engine: SearchEngine,
    tokens: list[str],
    hits: list[Hit],
    features: list[float],
    model: AbstentionModel | None,
    query: str = "",
    retriever: str = "",
) -> dict:
    unique = set(tokens)
    known = sorted(t for t in unique if t in engine.bm25.vocab)
    wq = weighted_query(query, engine.lexicon)
    signatures = engine.signatures.match(fold(query))
    phrases = best_phrases(engine, wq)
    ranker = cast("CombinedRanker", engine.ranker("combined")) if retriever == "combined" else None
    hit_rows = [
        _hit_row(engine, hit, tokens, field_matches(engine, hit.id, hit.section, unique), signatures, phrases)
        for hit in hits
    ]
    if ranker is not None:
        _add_ranker_view(hit_rows, ranker, query, wq)
    return {
        "query_tokens": sorted(unique),
        "unknown_tokens": sorted(unique - set(known)),
        "query": query_view(wq),
        "hits": hit_rows,
        "abstention": abstention_view(features, model),
    } | ({"weights_for_language": query_language(query)} if retriever == "combined" else {})


def _hit_row(
    engine: SearchEngine,
    hit: Hit,
    tokens: list[str],
    fields: dict,
    signatures: dict[str, list],
    phrases: dict[str, str],
) -> dict:
    """What matched for one hit: its fields, its best-scoring query terms, signatures and nearest phrasing."""
    index = _doc_index(engine, hit)
    scores = token_scores(engine, index, tokens) if index is not None else {}
    return {
        "id": hit.id,
        "section": hit.section,
        "score": round(hit.score, 4),
        "fields": fields,
        "top_terms": dict(sorted(scores.items(), key=lambda kv: -kv[1])[:8]),
        "signatures": signatures.get(hit.id, []),
        "phrasing": phrases.get(hit.id),
    }


def _add_ranker_view(hit_rows: list[dict], ranker: CombinedRanker, query: str, wq: WeightedQuery) -> None:
    """The combined ranker's part, per hit: each signal's value and weight, and what the classifier learned
    from (the query terms pushing towards the hit's entry)."""
    signals = {s.entry_id: s for s in ranker.signals(query)}
    weights = ranker.weights_for(query)
    for row in hit_rows:
        if row["id"] in signals:
            row["signals"] = {
                name: {"value": round(value, 4), "weight": weights.get(name, 0.0)}
                for name, value in signals[row["id"]].values.items()
            }
        if ranker.classifier is not None:
            row["learned_from"] = ranker.classifier.pushes(wq.tokens, wq.weights, row["id"])


def abstention_view(features: list[float], model: AbstentionModel | None) -> dict:
    """The abstention features and, per part of the model, its weights, p(in scope) and threshold."""
    view: dict = {"features": dict(zip(FEATURES, (round(v, 4) for v in features), strict=True))}
    if model is None:
        return view
    parts = [
        {
            "name": part.name,
            "weights": dict(zip(FEATURES, (round(w, 4) for w in part.weights), strict=True)),
            "probability_in_scope": round(part.probability(features), 4),
            "threshold": round(part.threshold, 4),
        }
        for part in model.parts
    ]
    return view | {"parts": parts, "abstains": model.abstains(features)}


def render(explanation: dict) -> str:
    lines = ["", "explain:", f"  query tokens: {' '.join(explanation['query_tokens'])}"]
    if explanation["unknown_tokens"]:
        lines.append(f"  not in the library's vocabulary: {' '.join(explanation['unknown_tokens'])}")
    view = explanation.get("query") or {}
    if view.get("noise"):
        lines.append(f"  counted as noise (x{NOISE_WEIGHT}): {' '.join(view['noise'])}")
    if view.get("bridged"):
        lines.append(f"  added by zh/en bridges: {' '.join(view['bridged'])}")
    if explanation.get("weights_for_language"):
        lines.append(f"  signal weights: those fitted on {explanation['weights_for_language']} questions")
    for row in explanation["hits"]:
        lines.append(f"  {row['id']} § {row['section']} (score {row['score']})")
        for name, found in row["fields"].items():
            lines.append(f"    {name}: {' '.join(found)}")
        if row["top_terms"]:
            lines.append("    top terms: " + ", ".join(f"{t} {v}" for t, v in row["top_terms"].items()))
        if row.get("signatures"):
            lines.append("    triage signatures: " + " | ".join(row["signatures"]))
        if row.get("phrasing"):
            lines.append(f"    closest phrasing: {row['phrasing']}")
        if row.get("signals"):
            parts = [f"{k} {v['value']}×{v['weight']}" for k, v in row["signals"].items()]
            lines.append("    signals: " + ", ".join(parts))
        if row.get("learned_from"):
            lines.append("    classifier pushed by: " + ", ".join(f"{t} +{v}" for t, v in row["learned_from"]))
    ab = explanation["abstention"]
    lines.append("  abstention features: " + ", ".join(f"{k}={v}" for k, v in ab["features"].items()))
    for part in ab.get("parts", []):
        below = part["probability_in_scope"] < part["threshold"]
        lines.append(
            f"  {part['name']}: p(in scope) {part['probability_in_scope']} vs threshold {part['threshold']}"
            + (" (abstains)" if below else "")
        )
    if "abstains" in ab:
        lines.append("  verdict: " + ("abstains" if ab["abstains"] else "answers"))
    return "\n".join(lines)
