"""The demo model's use of tools (upstreams/demo_tools.py): which tool a question calls for, the arguments it
writes, and how it reads a result back."""

from __future__ import annotations

import json

import pytest

from responses_gateway.protocol.tools import Tool, ToolSet
from responses_gateway.upstreams.demo_tools import (
    Arguments,
    Result,
    answer,
    call_input,
    choose,
    python_for,
    read_turn,
)

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = Tool("function", "get_weather", "get_weather", "The weather in a city.", CITY)
STOCKS = Tool("function", "get_stock_price", "get_stock_price", "A share's last price.",
              {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]})
WEB = Tool("function", "web_search", "web_search", "Search the web, open a web page, or find text in a page.",
           {"type": "object", "properties": {"action": {"type": "string", "enum": ["search", "open_page"]},
                                             "queries": {"type": "array", "items": {"type": "string"}},
                                             "url": {"type": "string"}}}, runner="web_search")
FILES = Tool("function", "file_search", "file_search", "Search the user's uploaded files.",
             {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
              "required": ["queries"]}, runner="file_search")
PYTHON = Tool("custom", "code_interpreter", "code_interpreter", "Run Python code in a sandbox.",
              format={"type": "text"}, runner="code_interpreter")
ADD = Tool("function", "add", "calc__add", "Add two integers.",
           {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]}, namespace=None, runner="mcp")


def tools(*offered: Tool, mode="auto", forced: Tool | None = None) -> ToolSet:
    return ToolSet(offered=list(offered), mode=mode, forced=forced)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def asked(question: str):
    return read_turn([user(question)])


# --------------------------------------------------------------------------- choosing


def test_the_tool_whose_name_the_question_shares():
    assert choose(tools(STOCKS, WEATHER), asked("What is the weather in Paris?")) is WEATHER
    assert choose(tools(WEB, FILES), asked("Look in my files for the refund policy")) is FILES
    assert choose(tools(FILES, WEB), asked("Search the web for news")) is WEB


def test_a_clients_tool_is_not_called_for_a_question_it_does_not_match():
    assert choose(tools(WEATHER), asked("Write a haiku about the sea.")) is None


def test_a_gateway_run_tool_is_called_when_nothing_matches_but_not_for_a_greeting():
    assert choose(tools(WEATHER, WEB), asked("What did the Fed decide?")) is WEB
    assert choose(tools(WEB), asked("Hello! Who are you?")) is None


def test_tool_choice_is_obeyed():
    assert choose(tools(WEATHER, STOCKS, mode="required", forced=STOCKS), asked("Weather?")) is STOCKS
    assert choose(tools(WEATHER, mode="required"), asked("Write a haiku.")) is WEATHER
    assert choose(tools(WEATHER, WEB, mode="none"), asked("What is the weather in Paris?")) is None


def test_no_second_call_once_the_result_is_back():
    turn = read_turn([user("What is the weather in Paris?"),
                      {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "c1", "output": "18°C"}])
    assert choose(tools(WEATHER, mode="required", forced=WEATHER), turn) is None
    assert [(r.name, r.output) for r in turn.results] == [("get_weather", "18°C")]
    again = read_turn([user("What is the weather in Paris?"), {"type": "function_call_output", "call_id": "c1",
                                                               "output": "18°C"}, user("And the weather in Rome?")])
    assert again.results == [] and choose(tools(WEATHER), again) is WEATHER


def test_deferred_and_client_run_kinds_are_not_called():
    deferred = Tool("function", "get_weather", "get_weather", "The weather.", CITY, deferred=True)
    computer = Tool("computer", "computer", "computer", runner="computer")
    assert choose(tools(deferred, computer), asked("What is the weather in Paris?")) is None


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(("tool", "question", "arguments"), [
    (WEATHER, "What is the weather in Paris?", {"city": "Paris"}),
    (WEATHER, "Weather for New York City, please.", {"city": "New York City"}),
    (WEATHER, "Tell me the weather, in two words", {"city": "two words"}),
    (WEATHER, "Is it going to rain tomorrow or the day after tomorrow?", {"city": "Is it going to rain tomorrow or "
                                                                                 "the day after tomorrow"}),
    (WEB, "What did the Fed decide?", {"queries": ["What did the Fed decide"]}),
    (FILES, "How long is the refund window?", {"queries": ["How long is the refund window"]}),
    (ADD, "Add 2 and 40", {"a": 2, "b": 40}),
    (ADD, "Add these", {"a": 1, "b": 1}),
])
def test_arguments_from_the_question(tool, question, arguments):
    assert json.loads(call_input(tool, question)) == arguments


def test_arguments_follow_the_schema():
    schema = {"type": "object", "required": ["unit", "days", "page", "detail", "when"],
              "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "minimum": 3},
                             "page": {"type": ["string", "null"], "format": "uri"}, "detail": {"type": "boolean"},
                             "when": {"anyOf": [{"type": "null"}, {"type": "number"}]}, "ignored": {"type": "string"}}}
    filled = Arguments("Forecast of https://example.org/x?").fill(schema, "f")
    assert filled == {"unit": "celsius", "days": 3, "page": "https://example.org/x", "detail": True, "when": 1.0}
    assert json.loads(call_input(Tool("function", "f", "f"), "hi")) == {}


def test_code_for_the_question():
    assert call_input(PYTHON, "What is 2**100?") == "print(2**100)\n"
    assert python_for("Compute (3 + 4) * 5 please") == "print((3 + 4) * 5)\n"
    assert python_for("What is 2^10?") == "print(2**10)\n"
    counted = python_for("Count the words of 'it is' please")
    assert counted.startswith("text = ") and "len(text.split())" in counted
    compile(counted, "<demo>", "exec")  # the question is a string literal, whatever quotes it holds
    freeform = Tool("custom", "apply_patch", "apply_patch", "Edit files.", format={"type": "text"})
    assert call_input(freeform, "Create hello.txt") == "Create hello.txt"


# --------------------------------------------------------------------------- reading the result


def test_a_file_search_passage_is_quoted_and_cited_by_its_marker():
    output = ("Results from the files (2). Cite a result by writing its marker, e.g. 【3】, right after the "
              "sentence it supports.\n\n【3】 policy.txt (score 0.912)\nRefunds within 30 days.\nMore text.\n\n"
              "【4】 other.txt (score 0.1)\nNot this.")
    assert answer([Result("file_search", output)]) == \
        "[demo] file_search found in policy.txt: “Refunds within 30 days.”【3】"


def test_a_web_result_is_cited_as_a_link():
    output = ('Web search results for "fed". Untrusted data.\n<untrusted_web_content>\n[1] Rates held\n'
              "https://news.example/fed?id=1\nThe Fed kept rates.\n</untrusted_web_content>\nCite each source.")
    assert answer([Result("web_search", output)]) == \
        "[demo] web_search found “Rates held” ([news.example](https://news.example/fed?id=1))."
    page = "Page: The article\nURL: https://news.example/a.\n<untrusted_web_content>\ntext"
    assert answer([Result("web_search", page)]) == \
        "[demo] web_search found “The article” ([news.example](https://news.example/a))."


def test_any_other_result_is_quoted_cut_short():
    assert answer([Result("add", "42"), Result("echo", "")]) == "[demo] add returned: 42 echo returned: (nothing)"
    quoted = answer([Result("f", "word " * 100)])
    assert quoted.endswith("…") and len(quoted) < 200


def test_outputs_that_are_not_text_are_read_too():
    turn = read_turn([user("Run it"), {"type": "custom_tool_call", "call_id": "c", "name": "code_interpreter",
                                       "input": "print(1)"},
                      {"type": "custom_tool_call_output", "call_id": "c", "output": [{"type": "input_text",
                                                                                       "text": "1"}]},
                      {"type": "function_call_output", "call_id": "unknown", "output": {"x": 1}}])
    assert [(r.name, r.output) for r in turn.results] == [("code_interpreter", "1"), ("the tool", '{"x":1}')]
