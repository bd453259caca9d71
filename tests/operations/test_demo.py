"""The demo model (`serve` with no upstream): what a newcomer tries in the README's first minute — chaining
with `previous_response_id` and conversations — visibly works, and `input_tokens` counts the whole input."""

from __future__ import annotations

import openai
import pytest

from responses_gateway.config import Settings
from tests.support.server import GatewayServer


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    with GatewayServer(Settings(upstream_url="demo", db=str(db))) as gw:
        yield openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30)


def test_demo_answers_from_the_whole_history(client):
    first = client.responses.create(model="demo", input="My name is Ada.")
    second = client.responses.create(model="demo", input="What is my name?", previous_response_id=first.id)
    assert "What is my name?" in second.output_text and "My name is Ada." in second.output_text
    assert "My name is Ada." not in second.output_text.split("You said:")[1].split("Earlier")[0]
    counted = client.responses.input_tokens.count(model="demo", input="What is my name?",
                                                  previous_response_id=first.id)
    assert second.usage.input_tokens == counted.input_tokens > first.usage.input_tokens


def test_demo_answers_from_a_conversation(client):
    conversation = client.conversations.create(items=[{"role": "user", "content": "I like tea."}])
    answer = client.responses.create(model="demo", input="And you?", conversation=conversation.id)
    assert "And you?" in answer.output_text and "I like tea." in answer.output_text
