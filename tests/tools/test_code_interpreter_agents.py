"""The OpenAI Agents SDK's CodeInterpreterTool against the gateway (its Responses model, a real sandbox)."""

from __future__ import annotations

import asyncio

import openai

from responses_gateway.configure import make as make_settings
from tests.support import needs
from tests.support.code_interpreter import answer, code_call
from tests.support.server import GatewayServer

needs.python_package("agents", "pip install openai-agents (in the `test` extra)")

from agents import Agent, CodeInterpreterTool, OpenAIResponsesModel, Runner, set_tracing_disabled  # noqa: E402
from agents.items import ToolCallItem  # noqa: E402

needs.bubblewrap()  # skipped with what to install where it is missing; a failure in CI

set_tracing_disabled(True)


def test_the_agents_sdk_code_interpreter_tool_runs_code_in_the_gateways_sandbox(upstream, tmp_path):
    upstream.enqueue(code_call("import statistics\nstatistics.mean([3, 5, 10])"),
                     answer("The mean is 6."))
    with GatewayServer(make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"),
                                code_interpreter="bubblewrap")) as gateway:

        async def main():
            async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0,
                                          timeout=60) as client:
                agent = Agent(name="analyst", instructions="Use the code interpreter for arithmetic.",
                              model=OpenAIResponsesModel(model="fake-model", openai_client=client),
                              tools=[CodeInterpreterTool(tool_config={"type": "code_interpreter",
                                                                      "container": {"type": "auto"}})])
                return await Runner.run(agent, "What is the mean of 3, 5 and 10?")

        result = asyncio.run(asyncio.wait_for(main(), 60))
    assert result.final_output == "The mean is 6."
    (call,) = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    assert call.type == "code_interpreter_call" and call.status == "completed"
    assert call.code == "import statistics\nstatistics.mean([3, 5, 10])" and call.container_id.startswith("cntr_")
    # the model read the value the sandbox computed
    assert upstream.requests[1].body["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "6"}
    sent = upstream.requests[0].body
    assert [t["function"]["name"] for t in sent["tools"]] == ["code_interpreter"]
