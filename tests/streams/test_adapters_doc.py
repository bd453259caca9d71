"""docs/adapters.md: its example adapter, run as written behind a real gateway."""

import re
import types
from pathlib import Path

import openai

from responses_gateway.config import Settings
from tests.support.server import GatewayServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def _example_module() -> types.ModuleType:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    source = next(b for b in blocks if "class ShoutUpstream" in b)
    module = types.ModuleType("shout")
    exec(compile(source, str(DOC), "exec"), module.__dict__)
    return module


def test_the_documented_adapter_serves_responses():
    shout = _example_module()
    with GatewayServer(Settings(db="none"), upstream=shout.ShoutUpstream()) as gateway:
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
        response = client.responses.create(model="shout", input="hello there")
        assert response.status == "completed"
        assert response.output_text == "HELLO THERE"
        assert response.usage.output_tokens == 2
        streamed = client.responses.create(model="shout", input="and again", stream=True)
        deltas = [ev.delta for ev in streamed if ev.type == "response.output_text.delta"]
        assert deltas == ["AND", " AGAIN"]
        assert [m.id for m in client.models.list()] == ["shout"]
