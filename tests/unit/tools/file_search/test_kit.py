"""The file_search kit's pure parts: the declaration, its echo, what a client is shown, what the model reads."""

import json

import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.file_search.kit import check, echo, lower, normalize, parse, shown

RESULTS = [{"attributes": {}, "file_id": "file_1", "filename": "a.txt", "score": 1.0, "text": "alpha"}]


def test_the_declaration_is_checked_and_echoed_with_its_defaults():
    declared = parse({"type": "file_search", "vector_store_ids": ["vs_1", "vs_1", "vs_2"]}, "tools[0]")
    assert declared.config.vector_store_ids == ("vs_1", "vs_2")
    assert [f.name for f in declared.functions] == ["file_search"] and declared.functions[0].runner == "file_search"
    assert echo(declared) == {"type": "file_search", "vector_store_ids": ["vs_1", "vs_2"], "filters": None,
                              "max_num_results": 10, "ranking_options": {"ranker": "auto", "score_threshold": 0.0}}
    for bad, param in (({}, "tools[0].vector_store_ids"), ({"vector_store_ids": "vs_1"}, "tools[0].vector_store_ids"),
                       ({"vector_store_ids": ["vs"] * 11}, "tools[0].vector_store_ids"),
                       ({"vector_store_ids": ["vs"], "max_num_results": 51}, "tools[0].max_num_results"),
                       ({"vector_store_ids": ["vs"], "unknown": 1}, "tools[0].unknown"),
                       ({"vector_store_ids": ["vs"], "filters": {"type": "eq"}}, "tools[0].filters")):
        with pytest.raises(APIError) as err:
            parse({"type": "file_search", **bad}, "tools[0]")
        assert err.value.status == 400 and err.value.param == param
    with pytest.raises(APIError):
        check([declared, parse({"type": "file_search", "vector_store_ids": ["vs_3"]}, "tools[1]")])


def test_clients_see_results_only_when_included_and_never_the_gateway_fields():
    item = {"id": "fs_1", "type": "file_search_call", "status": "completed", "queries": ["q"], "results": RESULTS,
            "cite_from": 4, "error": None}
    assert shown(item, frozenset()) == {"id": "fs_1", "type": "file_search_call", "status": "completed",
                                        "queries": ["q"], "results": None}
    assert shown(item, frozenset({"file_search_call.results"}))["results"] == RESULTS
    assert "cite_from" in item  # the stored item is untouched


def test_the_model_reads_a_search_as_a_call_and_its_numbered_results():
    call, output = lower({"id": "fs_1", "type": "file_search_call", "status": "completed", "queries": ["q"],
                          "results": RESULTS, "cite_from": 4})
    assert call == {"type": "function_call", "call_id": "fs_1", "name": "file_search",
                    "arguments": json.dumps({"queries": ["q"]}, separators=(",", ":"))}
    assert output["call_id"] == "fs_1" and "【4】 a.txt" in output["output"]
    _, failed = lower({"id": "fs_2", "type": "file_search_call", "status": "failed", "queries": ["q"],
                       "results": None, "error": "the store is gone"})
    assert failed["output"] == "The search failed: the store is gone"


def test_items_sent_back_are_normalized():
    got = normalize({"id": "fs_1", "type": "file_search_call", "queries": ["q"], "status": "completed",
                     "results": None, "extra": 1}, "input[0]")
    assert got == {"id": "fs_1", "type": "file_search_call", "queries": ["q"], "status": "completed", "results": None}
    with pytest.raises(APIError) as err:
        normalize({"type": "file_search_call"}, "input[0]")
    assert err.value.param == "input[0].queries"
