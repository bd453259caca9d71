"""docs/computer-use.md's Playwright computer, run as the docs give it, in a real Chromium page: the Agents SDK's
ComputerTool drives it through the real gateway, in front of a scripted Qwen3-VL that clicks a text box in its
0..1000 frame, types and presses Enter — the page's own script sees the keystrokes. The model gets the real
browser's screenshots back."""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path

import openai
import pytest

from responses_gateway.configure import make as make_settings
from responses_gateway.pictures import dimensions
from tests.support import needs
from tests.support.fake_chat import Stream, text_stream
from tests.support.server import GatewayServer
from tests.tools.test_computer import computer, offered, sent_images

DOC = Path(__file__).parents[2] / "docs" / "computer-use.md"
PAGE = """<body style="margin:0">
<input id="q" style="position:absolute; left:440px; top:380px; width:400px; height:40px">
<script>
document.getElementById("q").addEventListener("keydown", e => {
  if (e.key === "Enter") document.title = "sent:" + e.target.value;
});
</script></body>"""


def documented_computer() -> type:
    """The `Browser` class of the docs, executed as it is written there."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    (source,) = [b for b in blocks if "class Browser(AsyncComputer)" in b]
    namespace: dict = {}
    exec(compile(source, str(DOC), "exec"), namespace)
    return namespace["Browser"]


@pytest.fixture
def browser_page():
    """A real Chromium page of 1280x800 showing PAGE, and the loop it lives on."""
    needs.playwright()
    executable = needs.chromium()
    from playwright.async_api import async_playwright

    loop = asyncio.new_event_loop()

    async def start():
        playwright = await async_playwright().start()
        browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        await page.set_content(PAGE)
        return playwright, browser, page

    playwright, browser, page = loop.run_until_complete(start())
    try:
        yield loop, page
    finally:
        loop.run_until_complete(browser.close())
        loop.run_until_complete(playwright.stop())
        loop.close()


def test_the_documented_playwright_computer_is_driven_through_the_gateway(upstream, browser_page, tmp_path):
    from agents import Agent, ComputerTool, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    loop, page = browser_page
    Browser = documented_computer()
    upstream.enqueue(computer({"action": "screenshot"}, "a", "computer_use"),
                     computer({"action": "left_click", "coordinate": [500, 500]}, "b", "computer_use"),
                     computer({"action": "type", "text": "hello"}, "c", "computer_use"),
                     computer({"action": "key", "keys": ["Return"]}, "d", "computer_use"),
                     Stream(text_stream(["Sent hello."])))
    settings = make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"), computer_profile="qwen3-vl")
    with GatewayServer(settings) as gateway:
        async def main():
            async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as sdk:
                agent = Agent(name="operator", instructions="Use the computer.",
                              model=OpenAIResponsesModel(model="qwen3-vl", openai_client=sdk),
                              tools=[ComputerTool(computer=Browser(page))])
                return await asyncio.wait_for(Runner.run(agent, "Send hello from the box."), 60)

        result = loop.run_until_complete(main())
        title = loop.run_until_complete(page.title())
    assert result.final_output == "Sent hello." and title == "sent:hello"
    last = upstream.requests[-1]
    images = sent_images(last)
    assert len(images) == 3  # four screenshots, the last three kept as images
    for url in images:  # the browser's own screenshots, as the model gets them
        head = base64.b64decode(url.split(",", 1)[1][:4096])
        assert url.startswith("data:image/png;base64,") and dimensions(head) == (1280, 800)
    assert "The screen's resolution is 1000x1000." in offered(last)["description"]
