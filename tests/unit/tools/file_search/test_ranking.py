"""Hybrid ranking: weighted reciprocal-rank fusion, merging queries, normalisation to [0, 1], thresholds."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from responses_gateway.errors import APIError
from responses_gateway.tools.file_search.ranking import K, Ranking, final, fuse, merge, parse_ranking


def test_fusion_counts_both_lists_and_their_weights():
    scores = fuse(["a", "b"], ["b", "c"], Ranking())
    assert scores["b"] == pytest.approx(1 / (K + 2) + 1 / (K + 1))
    assert scores["a"] == pytest.approx(1 / (K + 1)) and scores["c"] == pytest.approx(1 / (K + 2))
    assert fuse(["a"], ["c"], Ranking(text_weight=0)) == {"c": pytest.approx(1 / (K + 1))}
    heavy = fuse(["a"], ["c"], Ranking(text_weight=1, embedding_weight=2))
    assert max(heavy, key=heavy.get) == "c"


def test_queries_merge_per_chunk_and_the_best_scores_one():
    merged = merge([{"a": 0.2, "b": 0.1}, {"b": 0.4}])
    assert merged == {"a": 0.2, "b": 0.4}
    ranked = final(merged, Ranking(), 10)
    assert ranked == [("b", 1.0), ("a", 0.5)]
    assert final(merged, Ranking(score_threshold=0.6), 10) == [("b", 1.0)]
    assert final(merged, Ranking(), 1) == [("b", 1.0)]
    assert final({}, Ranking(), 10) == []
    # a weight so small that every product underflows leaves nothing to rank (found by the property below)
    assert final(fuse([], ["a"], Ranking(0.0, 5e-324)), Ranking(), 10) == []


@given(st.lists(st.text(min_size=1, max_size=3), max_size=30, unique=True),
       st.lists(st.text(min_size=1, max_size=3), max_size=30, unique=True),
       st.floats(0, 10), st.floats(0, 10))
def test_scores_are_always_in_zero_one_with_the_best_at_one(keyword, vector, tw, ew):
    ranking = Ranking(tw, ew)
    ranked = final(fuse(keyword, vector, ranking), ranking, 100)
    assert all(0 <= s <= 1 for _, s in ranked)
    if ranked:
        assert ranked[0][1] == 1.0
        assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


def test_ranking_options_are_checked():
    assert parse_ranking(None, "r") == Ranking()
    got = parse_ranking({"ranker": "auto", "score_threshold": 0.5,
                         "hybrid_search": {"embedding_weight": 2, "text_weight": 0.5}}, "r")
    assert got == Ranking(0.5, 2.0, 0.5)
    for bad, param in (({"ranker": "x"}, "r.ranker"), ({"score_threshold": 1.5}, "r.score_threshold"),
                       ({"score_threshold": True}, "r.score_threshold"),
                       ({"hybrid_search": {"embedding_weight": 1}}, "r.hybrid_search.text_weight"),
                       ({"hybrid_search": {"embedding_weight": 0, "text_weight": 0}}, "r.hybrid_search"),
                       ({"hybrid_search": {"embedding_weight": -1, "text_weight": 1}}, "r.hybrid_search.embedding_weight"),
                       ({"other": 1}, "r.other")):
        with pytest.raises(APIError) as err:
            parse_ranking(bad, "r")
        assert err.value.param == param
