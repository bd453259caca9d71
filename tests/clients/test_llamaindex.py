"""LlamaIndex's `OpenAIResponses` LLM against the gateway over a Chat Completions route: complete, stream_chat,
a tool call, and the answer chained by previous_response_id (track_previous_responses).

llama-index-llms-openai needs openai<3, so it runs in its own environment, tests/e2e/llamaindex/.venv, made
from tests/e2e/llamaindex/requirements.txt (`.ci/run` builds it); the script prints one JSON summary.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import needs
from tests.support.e2e_setup import ensure_venv
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream

HERE = Path(__file__).parents[1] / "e2e" / "llamaindex"
PYTHON = HERE / ".venv" / "bin" / "python"
INSTALL = "python3 -m venv tests/e2e/llamaindex/.venv && tests/e2e/llamaindex/.venv/bin/pip install -r " \
          "tests/e2e/llamaindex/requirements.txt"


def environment() -> Path:
    """LlamaIndex's own Python (made on first use): skipped, or failed under CI, where it cannot be made."""
    ensure_venv("llamaindex")
    needs.need("LlamaIndex's environment", PYTHON.exists(), f"{PYTHON} is missing; make it with `{INSTALL}`")
    return PYTHON


@pytest.fixture
def run_llamaindex(gateway):
    environment()

    def run() -> dict:
        proc = subprocess.run([str(PYTHON), str(HERE / "responses_client.py"), "--base-url", f"{gateway.url}/v1"],
                              capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": ""})
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        assert proc.returncode == 0, f"{summary}\n{proc.stderr[-3000:]}"
        return summary

    return run


def conversation(usage: dict | None) -> list[list[str]]:
    return [text_stream(["Hel", "lo!"], usage=usage), text_stream(["one, ", "two"], usage=usage),
            tool_calls_stream([("call_w1", "get_weather", ['{"location":', '"Paris"}'])], usage=usage),
            text_stream(["It is 21."], usage=usage)]


def test_llamaindex_openai_responses(run_llamaindex, upstream, http):
    upstream.enqueue(*conversation(make_usage(8, 3)))
    out = run_llamaindex()
    assert out["text"] == "Hello!" and out["deltas"] == ["one, ", "two"]
    assert out["tool"] == {"name": "get_weather", "kwargs": {"location": "Paris"}, "id": "call_w1",
                           "response_id": out["tool"]["response_id"]}
    assert out["chain"]["text"] == "It is 21."
    chained = http.get(f"/v1/responses/{out['chain']['response_id']}").json()
    assert chained["previous_response_id"] == out["tool"]["response_id"]
    # only the tool output was sent: the gateway restored the question and the call
    assert [m["role"] for m in upstream.requests[-1].body["messages"]] == ["user", "assistant", "tool"]


def test_llamaindex_when_the_upstream_sends_no_usage(run_llamaindex, upstream):
    upstream.enqueue(*conversation(None))
    assert run_llamaindex()["chain"]["text"] == "It is 21."
