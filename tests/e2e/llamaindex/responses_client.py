"""LlamaIndex's `OpenAIResponses` LLM against the gateway: one conversation, printed as one JSON summary.

Runs in its own environment (tests/e2e/llamaindex/.venv, from requirements.txt): llama-index-llms-openai
needs openai<3, the gateway's test environment has openai 3. Usage:

    .venv/bin/python responses_client.py --base-url http://127.0.0.1:8080/v1 --model fake-model

Steps, in order (the caller scripts the upstream's answers in the same order):
  1. complete()                          -> text
  2. stream_chat()                       -> deltas
  3. chat_with_tools(get_weather)        -> a tool call
  4. chat() with only the tool's output: track_previous_responses chains it by previous_response_id
A failure prints {"error": {...}} and exits 1, so the caller always has JSON to read.
"""

import argparse
import json
import sys

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAIResponses


def get_weather(location: str) -> str:
    """Get the weather for a location."""
    return f"21 degrees in {location}"


def main(base_url: str, model: str) -> dict:
    common = {"model": model, "api_base": base_url, "api_key": "test-key", "max_retries": 0,
              "context_window": 8192}
    llm = OpenAIResponses(**common)
    summary = {"text": llm.complete("Say hello").text}
    summary["deltas"] = [r.delta for r in llm.stream_chat([ChatMessage(role="user", content="Count")]) if r.delta]

    tracked = OpenAIResponses(track_previous_responses=True, **common)
    weather = FunctionTool.from_defaults(fn=get_weather)
    asked = tracked.chat_with_tools([weather], user_msg="Weather in Paris?")
    (call,) = tracked.get_tool_calls_from_response(asked, error_on_no_tool_call=True)
    summary["tool"] = {"name": call.tool_name, "kwargs": call.tool_kwargs, "id": call.tool_id,
                       "response_id": tracked._previous_response_id}
    output = ChatMessage(role=MessageRole.TOOL, content=weather(**call.tool_kwargs).content,
                         additional_kwargs={"tool_call_id": call.tool_id, "name": call.tool_name})
    answer = tracked.chat([output])  # the rest of the history is the gateway's to restore
    summary["chain"] = {"text": answer.message.content, "response_id": tracked._previous_response_id}
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="fake-model")
    args = parser.parse_args()
    try:
        print(json.dumps(main(args.base_url, args.model)))
    except Exception as exc:  # the caller reads JSON either way
        print(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}))
        sys.exit(1)
