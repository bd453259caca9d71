"""`responses-gateway check` against real servers on loopback: the gateway itself passes, a vLLM-like server
replaying vLLM's recorded streams is caught on each of its known defects, an OpenAI-like server replaying
OpenAI's recordings passes; saved streams and the HTML report (rendered in headless Chromium) too."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from responses_gateway.cli import main
from responses_gateway.config import Settings
from responses_gateway.route import Route
from responses_gateway.upstreams.responses import ResponsesUpstream
from tests.support import needs
from tests.support.fake_chat import RecordedRequest, Stream, text_stream, tool_calls_stream
from tests.support.recordings import RECORDINGS_DIR, load_recording
from tests.support.replay_servers import OpenAILikeServer, VllmLikeServer
from tests.support.schema import SPEC_PATH
from tests.support.server import GatewayServer

VLLM_TEXT = RECORDINGS_DIR / "vllm_responses" / "gptoss20b-responses-text-stream.yaml"


def check(capsys, *args: str) -> tuple[int, dict]:
    """Run the command in this process; its exit status and JSON report."""
    with pytest.raises(SystemExit) as exit_:
        main(["check", *args, "--json", "--spec", str(SPEC_PATH)])
    return exit_.value.code, json.loads(capsys.readouterr().out)


def statuses(report: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in report["scenarios"]}


def violations(report: dict, scenario: str) -> list[dict]:
    found = next(s for s in report["scenarios"] if s["name"] == scenario)
    return [v for ex in found["exchanges"] for v in ex["violations"]]


def chat_answer(request: RecordedRequest) -> Stream:
    """What a Chat Completions model would answer to the gateway's upstream request for each scenario."""
    tools = [t["function"]["name"] for t in (request.body or {}).get("tools") or []]
    if not tools:
        return Stream(text_stream(["Hello", "!"]))
    arguments = '{"input":"SELECT count(*) FROM orders"}' if tools[0] == "run_sql" else '{"location":"Paris"}'
    return Stream(tool_calls_stream([("call_1", tools[0], [arguments[:9], arguments[9:]])]))


def test_the_gateway_passes(gateway, upstream, capsys):
    upstream.default = chat_answer
    code, report = check(capsys, gateway.url, "--model", "fake-model")
    assert code == 0, json.dumps(report, indent=1)[:3000]
    assert report["ok"] and report["rules"] == {}
    found = statuses(report)
    assert found.pop("websocket") == "pass"  # the gateway offers WebSocket mode (docs/websocket.md)
    assert set(found.values()) == {"pass"}


def test_a_vllm_like_server_is_caught_on_its_known_defects(capsys):
    with VllmLikeServer() as server:
        code, report = check(capsys, server.url, "--model", "openai/gpt-oss-20b")
    assert code == 1 and not report["ok"]
    by_rule = {(v["rule"], v["type"]): v for v in violations(report, "stream")}
    # reasoning items streamed under msg_ ids
    assert by_rule["item.id-prefix", "response.output_item.added"]["event"]["item"]["id"].startswith("msg_")
    # the message's first content part announced at content_index 1
    assert "content part 1 announced, expected 0" in by_rule["part.index", "response.content_part.added"]["message"]
    # response.completed lists the items under other ids than the streamed ones
    assert "output[0] id 'rs_" in by_rule["terminal.output", "response.completed"]["message"]
    # vLLM's own reasoning part events, unknown to clients
    assert by_rule["event.known-type", "response.reasoning_part.added"]
    tool_rules = {(v["rule"], v["type"]) for v in violations(report, "function-tool")}
    assert ("item.id", "response.output_item.done") in tool_rules  # the call's .done has id null
    assert statuses(report)["chain"] == "fail"  # no response store: previous_response_id is not found
    # its response objects lack completed_at, which the spec requires
    assert {v["rule"] for v in violations(report, "text")} == {"schema.response"}
    assert statuses(report)["error"] == "pass"
    assert statuses(report)["websocket"] == "skip"


def test_the_gateway_repairs_what_the_vllm_like_server_breaks(capsys, tmp_path):
    """The same server behind a `kind = "responses"` route: every stream and object the client gets passes.
    (The custom tool is left out: this server answers it with text, and the gateway cannot invent a call.)"""
    with VllmLikeServer() as vllm:
        upstream = ResponsesUpstream(Route(kind="responses", base_url=vllm.base_url))
        with GatewayServer(Settings(db=str(tmp_path / "responses.db")), upstream=upstream) as gateway:
            code, report = check(capsys, gateway.url, "--model", "openai/gpt-oss-20b",
                                 "--only", "text,stream,reasoning,function-tool,chain,error")
    assert code == 0, json.dumps(report, indent=1)[:3000]
    assert set(statuses(report).values()) == {"pass"}


def test_an_openai_like_server_passes(capsys):
    with OpenAILikeServer() as server:
        code, report = check(capsys, server.url, "--model", "gpt-5-nano")
    assert code == 0, json.dumps(report, indent=1)[:3000]
    assert statuses(report) == {"text": "pass", "stream": "pass", "reasoning": "pass", "function-tool": "pass",
                                "custom-tool": "pass", "chain": "pass", "error": "pass", "websocket": "skip"}


def test_only_runs_the_named_scenarios(capsys):
    with OpenAILikeServer() as server:
        code, report = check(capsys, f"{server.url}/v1", "--model", "gpt-5-nano", "--only", "stream,error")
    assert code == 0 and list(statuses(report)) == ["stream", "error"]


def test_a_check_that_cannot_run_exits_2(capsys, tmp_path):
    for args in (["http://127.0.0.1:9", "--model", "m", "--only", "nope"], ["http://127.0.0.1:9"],
                 ["--sse-file", str(tmp_path / "missing.sse")]):
        with pytest.raises(SystemExit) as exit_:
            main(["check", *args])
        assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown scenario nope" in err and "give URL and --model" in err and "missing.sse" in err


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "responses_gateway", "check", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def vllm_sse(tmp_path) -> Path:
    path = tmp_path / "vllm.sse"
    path.write_text(load_recording(VLLM_TEXT).sse_text)
    return path


def test_a_saved_stream_is_checked(vllm_sse):
    done = run_cli("--sse-file", str(vllm_sse))
    assert done.returncode == 1, done.stderr
    assert "[part.index]" in done.stdout and "content part 1 announced, expected 0" in done.stdout
    assert '{"content_index":1,"item_id":"msg_92d8d3bf72964f1e"' in done.stdout  # the offending event, quoted
    assert done.stdout.rstrip().endswith("result: FAIL (1 failed)")


def test_a_saved_gateway_stream_passes(http, upstream, tmp_path):
    upstream.enqueue(Stream(text_stream(["Hi", " there"])))
    saved = tmp_path / "gateway.sse"
    saved.write_bytes(http.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True}).content)
    done = run_cli("--sse-file", str(saved))
    assert done.returncode == 0, done.stdout
    assert "PASS  sse-file" in done.stdout


# --------------------------------------------------------------------------- the HTML report in a browser


def png_size_and_colours(png: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values of the decompressed image data."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    pos, data = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            data += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(data)))


def chromium() -> str:
    return needs.chromium()


def test_html_report_renders_with_the_violations_marked(capsys, tmp_path):
    browser = chromium()
    page = tmp_path / "report.html"
    with VllmLikeServer() as server, pytest.raises(SystemExit):
        main(["check", server.url, "--model", "openai/gpt-oss-20b", "--only", "stream,function-tool",
              "--html", str(page)])
    capsys.readouterr()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'p'}"]
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    width, height, colours = png_size_and_colours(shot.read_bytes())
    assert (width, height) == (1200, 1600)
    assert colours > 50, "the screenshot is (nearly) blank"
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert 'id="verdict">FAIL<' in dom
    for rule in ("item.id-prefix", "part.index", "terminal.output", "item.id"):
        assert f'data-rule="{rule}"' in dom
    assert dom.count('<li class="violation">') >= 5
    assert dom.count("response.output_text.delta") >= 2  # the whole timeline is there, not only violations


def test_every_rule_and_scenario_is_documented():
    from responses_gateway.conformance.report import ALL_RULES
    from responses_gateway.conformance.scenarios import SCENARIOS

    doc = (Path(__file__).parents[2] / "docs" / "check.md").read_text()
    assert [rule for rule in ALL_RULES if f"| `{rule}` |" not in doc] == []
    assert [name for name in SCENARIOS if f"| `{name}` |" not in doc] == []
