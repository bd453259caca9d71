"""Several upstreams behind one gateway, chosen by model name from a TOML config."""

import httpx
import openai
import pytest

from responses_gateway.config import Settings
from tests.support.fake_chat import FakeChatUpstream, text_stream
from tests.support.server import GatewayServer


@pytest.fixture
def routed(tmp_path, upstream):
    with FakeChatUpstream(models=("small-1", "small-2", "other")) as second:
        config = tmp_path / "routes.toml"
        config.write_text(f'''
[[routes]]
match = "big"
kind = "chat_completions"
base_url = "{upstream.base_url}"
api_key_env = "RG_TEST_BIG_KEY"
model = "vendor/big-model-v2"
max_tokens = 77

[[routes]]
match = "small-*"
base_url = "{second.base_url}"
''')
        settings = Settings(config=str(config), db=str(tmp_path / "db.sqlite"))
        import os
        os.environ["RG_TEST_BIG_KEY"] = "sk-big"
        try:
            with GatewayServer(settings) as gw:
                yield gw, upstream, second
        finally:
            del os.environ["RG_TEST_BIG_KEY"]


def test_models_are_routed_by_name_and_pattern(routed):
    gw, big, small = routed
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    big.enqueue(text_stream(["from big"]))
    small.enqueue(text_stream(["from small"]))
    assert client.responses.create(model="big", input="hi").output_text == "from big"
    assert client.responses.create(model="small-2", input="hi").output_text == "from small"
    sent_big = big.requests[0]
    assert sent_big.body["model"] == "vendor/big-model-v2"  # the upstream's own name
    assert sent_big.body["max_tokens"] == 77  # the route's default
    assert sent_big.headers["authorization"] == "Bearer sk-big"
    assert small.requests[0].body["model"] == "small-2"
    ids = {m["id"] for m in httpx.get(f"{gw.url}/v1/models").json()["data"]}
    assert ids == {"big", "small-1", "small-2"}


def test_unknown_model_is_404(routed):
    gw, _, _ = routed
    resp = httpx.post(f"{gw.url}/v1/responses", json={"model": "nope", "input": "x"})
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "model_not_found"


def test_chain_across_upstreams(routed):
    gw, big, small = routed
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    big.enqueue(text_stream(["Paris."]))
    first = client.responses.create(model="big", input="Capital of France?")
    small.enqueue(text_stream(["About 2 million."]))
    second = client.responses.create(model="small-1", input="Population?", previous_response_id=first.id)
    assert second.output_text == "About 2 million."
    assert small.requests[0].body["messages"] == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Population?"},
    ]


def test_chain_across_upstream_kinds(tmp_path, upstream):
    """Chat Completions and Anthropic behind one gateway; a chain moves from one to the other and back."""
    from tests.support.fake_anthropic import FakeAnthropic, message_stream, text_block

    with FakeAnthropic() as claude:
        config = tmp_path / "routes.toml"
        config.write_text(f'''
[[routes]]
match = "claude-*"
kind = "anthropic"
base_url = "{claude.url}"
api_key = "k"
max_tokens = 512

[[routes]]
match = "*"
base_url = "{upstream.base_url}"
''')
        with GatewayServer(Settings(config=str(config), db=str(tmp_path / "db.sqlite"))) as gw:
            client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
            upstream.enqueue(text_stream(["Paris."]))
            first = client.responses.create(model="local-model", input="Capital of France?")
            claude.enqueue(message_stream(text_block(0, ["Around ", "2.1 million."])))
            second = client.responses.create(model="claude-sonnet-4-5", input="Population?",
                                             previous_response_id=first.id)
            assert second.output_text == "Around 2.1 million."
            sent = claude.requests[0].body
            assert sent["messages"] == [
                {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Paris."}]},
                {"role": "user", "content": [{"type": "text", "text": "Population?"}]},
            ]
            upstream.enqueue(text_stream(["Yes."]))
            client.responses.create(model="local-model", input="Big?", previous_response_id=second.id)
            assert [m["content"] for m in upstream.requests[-1].body["messages"]] == [
                "Capital of France?", "Paris.", "Population?", "Around 2.1 million.", "Big?"]
