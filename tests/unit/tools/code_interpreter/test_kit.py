"""The code_interpreter kit's pure parts: declarations, items, what upstreams and clients see."""

from __future__ import annotations

import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.code_interpreter import kit


def test_a_declaration_names_a_container_or_asks_for_one():
    declared = kit.parse({"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-1"],
                                                                     "memory_limit": "4g"}}, "tools[0]")
    assert declared.config == kit.Container(None, ("file-1",), "4g")
    (offered,) = declared.functions
    assert (offered.kind, offered.wire_name, offered.runner) == ("custom", "code_interpreter", "code_interpreter")
    assert kit.echo(declared) == {"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-1"]}}
    named = kit.parse({"type": "code_interpreter", "container": "cntr_abc"}, "tools[1]")
    assert named.config.id == "cntr_abc" and kit.echo(named) == {"type": "code_interpreter", "container": "cntr_abc"}
    # OpenAI echoes an auto container as {"type": "auto"}: the memory limit is not repeated
    plain = kit.parse({"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "1g"}}, "tools[0]")
    assert kit.echo(plain) == {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.mark.parametrize("spec, param", [
    ({"type": "code_interpreter"}, "tools[0].container"),
    ({"type": "code_interpreter", "container": 3}, "tools[0].container"),
    ({"type": "code_interpreter", "container": "abc"}, "tools[0].container"),
    ({"type": "code_interpreter", "container": {"type": "manual"}}, "tools[0].container.type"),
    ({"type": "code_interpreter", "container": {"type": "auto", "file_ids": "file-1"}}, "tools[0].container.file_ids"),
    ({"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "8g"}},
     "tools[0].container.memory_limit"),
    ({"type": "code_interpreter", "container": {"type": "auto", "nope": 1}}, "tools[0].container.nope"),
    ({"type": "code_interpreter", "container": {"type": "auto"}, "extra": 1}, "tools[0].extra"),
])
def test_a_bad_declaration_is_a_400_naming_the_field(spec, param):
    with pytest.raises(APIError) as caught:
        kit.parse(spec, "tools[0]")
    assert (caught.value.status, caught.value.param) == (400, param)


def test_only_one_declaration():
    one = kit.parse({"type": "code_interpreter", "container": {"type": "auto"}}, "tools[0]")
    two = kit.parse({"type": "code_interpreter", "container": {"type": "auto"}}, "tools[1]")
    kit.check([one])
    with pytest.raises(APIError) as caught:
        kit.check([one, two])
    assert caught.value.param == "tools[1]"


ITEM = {"id": "ci_1", "type": "code_interpreter_call", "status": "completed", "code": "print(1)\n2",
        "container_id": "cntr_1", "outputs": [{"type": "logs", "logs": "1\n"}, {"type": "logs", "logs": "2"},
                                              {"type": "image", "url": "/v1/containers/cntr_1/files/cfile_1/content"}]}


def test_upstreams_see_a_freeform_call_and_what_it_printed():
    call, output = kit.lower(ITEM)
    assert call == {"type": "custom_tool_call", "call_id": "ci_1", "name": "code_interpreter", "input": "print(1)\n2"}
    assert output == {"type": "custom_tool_call_output", "call_id": "ci_1",
                      "output": "1\n2\n[an image was shown to the user]"}
    assert kit.lower({**ITEM, "outputs": []})[1]["output"] == "(no output)"
    assert kit.lower({**ITEM, "status": "failed", "outputs": None})[1]["output"] == \
        "(the call ended failed, without output)"


def test_clients_see_outputs_only_when_include_asks():
    assert kit.shown(ITEM, frozenset())["outputs"] is None
    assert kit.shown(ITEM, frozenset({"code_interpreter_call.outputs"})) is ITEM
    assert ITEM["outputs"]  # the stored item keeps them


def test_an_item_sent_back_is_normalized_and_checked():
    assert kit.normalize({**ITEM, "extra": 1}, "input[0]") == {k: ITEM[k] for k in (
        "type", "status", "code", "container_id", "outputs", "id")}
    with pytest.raises(APIError) as caught:
        kit.normalize({"type": "code_interpreter_call", "id": "ci_1"}, "input[3]")
    assert caught.value.param == "input[3].container_id"
    with pytest.raises(APIError):
        kit.normalize({**ITEM, "outputs": "logs"}, "input[0]")
