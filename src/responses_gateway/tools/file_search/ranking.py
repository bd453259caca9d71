"""Hybrid ranking: keyword (BM25) and vector (cosine) ranks fused by weighted reciprocal rank.

Each query ranks chunks twice — by keyword and by embedding — and a chunk's fused score is
`text_weight / (K + keyword rank) + embedding_weight / (K + vector rank)` (ranks from 1; a list a chunk is
absent from adds nothing), the fusion OpenAI's `ranking_options.hybrid_search` weights describe. Several
queries are merged per chunk (its best score), then scores are divided by the best one: the best hit scores
1.0 and every score is in [0, 1]. `score_threshold` is applied once, to that final score.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import invalid

K = 60  # the usual reciprocal-rank constant: ranks far down the lists still count, a little
RANKERS = ("auto", "default-2024-11-15", "none")


@dataclass(frozen=True)
class Ranking:
    text_weight: float = 1.0
    embedding_weight: float = 1.0
    score_threshold: float = 0.0


def parse_ranking(value: Any, where: str) -> Ranking:
    if value is None:
        return Ranking()
    if not isinstance(value, dict):
        raise invalid(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    unknown = set(value) - {"ranker", "score_threshold", "hybrid_search"}
    if unknown:
        raise invalid(f"Unknown parameter: '{where}.{sorted(unknown)[0]}'.", f"{where}.{sorted(unknown)[0]}",
                      "unknown_parameter")
    ranker = value.get("ranker")
    if ranker is not None and ranker not in RANKERS:
        raise invalid(f"Invalid value for '{where}.ranker': expected one of {', '.join(RANKERS)}.", f"{where}.ranker")
    threshold = value.get("score_threshold", 0.0)
    if threshold is None:
        threshold = 0.0
    if not _number(threshold) or not 0 <= threshold <= 1:
        raise invalid(f"Invalid '{where}.score_threshold': expected a number between 0 and 1.",
                      f"{where}.score_threshold")
    text, embedding = 1.0, 1.0
    hybrid = value.get("hybrid_search")
    if hybrid is not None:
        if not isinstance(hybrid, dict) or set(hybrid) - {"embedding_weight", "text_weight"}:
            raise invalid(f"Invalid '{where}.hybrid_search': expected an object with 'embedding_weight' and "
                          "'text_weight'.", f"{where}.hybrid_search")
        for name in ("embedding_weight", "text_weight"):
            if name not in hybrid:
                raise invalid(f"Missing required parameter: '{where}.hybrid_search.{name}'.",
                              f"{where}.hybrid_search.{name}", "missing_required_parameter")
            if not _number(hybrid[name]) or hybrid[name] < 0:
                raise invalid(f"Invalid '{where}.hybrid_search.{name}': expected a number of at least 0.",
                              f"{where}.hybrid_search.{name}")
        text, embedding = float(hybrid["text_weight"]), float(hybrid["embedding_weight"])
        if text == 0 and embedding == 0:
            raise invalid(f"Invalid '{where}.hybrid_search': the weights may not both be 0.", f"{where}.hybrid_search")
    return Ranking(text, embedding, float(threshold))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def fuse(keyword: Sequence[Hashable], vector: Sequence[Hashable], ranking: Ranking) -> dict[Hashable, float]:
    """One query's two rankings (best first) → fused scores."""
    scores: dict[Hashable, float] = {}
    if ranking.text_weight:
        for rank, key in enumerate(keyword, start=1):
            scores[key] = scores.get(key, 0.0) + ranking.text_weight / (K + rank)
    if ranking.embedding_weight:
        for rank, key in enumerate(vector, start=1):
            scores[key] = scores.get(key, 0.0) + ranking.embedding_weight / (K + rank)
    return scores


def merge(per_query: Sequence[dict[Hashable, float]]) -> dict[Hashable, float]:
    """Several queries' scores → each chunk's best."""
    merged: dict[Hashable, float] = {}
    for scores in per_query:
        for key, score in scores.items():
            if score > merged.get(key, 0.0):
                merged[key] = score
    return merged


def final(scores: dict[Hashable, float], ranking: Ranking, limit: int) -> list[tuple[Hashable, float]]:
    """Normalised (the best is 1.0), thresholded, best first, at most `limit`."""
    best = max(scores.values(), default=0.0)
    if best <= 0:  # nothing scored (a weight so small its products underflow): no order to give
        return []
    ranked = sorted(((key, min(1.0, score / best)) for key, score in scores.items()), key=lambda kv: -kv[1])
    return [(key, score) for key, score in ranked if score >= ranking.score_threshold][:limit]
