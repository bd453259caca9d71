"""End to end: the real Codex CLI → the real gateway → a fake Chat Completions upstream.

Codex 0.169.0 (pinned in tests/e2e/codex/package.json) runs `codex exec` offline against the gateway on
loopback. The fake upstream answers the first request with an `apply_patch` call and the second with a
short text, so this one turn covers everything Codex needs from the gateway:

* its request is accepted as is: developer messages, `client_metadata`, `include`, `reasoning`, `text`,
  ids on input items, and the hosted `web_search` tool, which is dropped;
* Codex's custom (freeform) `apply_patch` tool goes upstream as a function with one string `input`
  parameter, and the upstream's streamed call comes back as a `custom_tool_call` that Codex runs;
* Codex replays the call and its `custom_tool_call_output`, which go upstream as an assistant message with
  `tool_calls` followed by a `tool` message;
* the stream ends the way Codex requires (items in `output_item.done`, `response.completed` with an id
  and complete usage).

The binary is `tests/e2e/codex/node_modules/.bin/codex`, or $CODEX_BIN. Without it the test is skipped
locally and fails under CI, where `.ci/run` must install it with `npm ci --prefix tests/e2e/codex`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import needs
from tests.support.e2e_setup import ensure_node_modules
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream

CODEX_DIR = Path(__file__).parents[1] / "e2e" / "codex"
DEFAULT_BIN = CODEX_DIR / "node_modules" / ".bin" / "codex"
INSTALL = "npm ci --prefix tests/e2e/codex"

# Codex offers apply_patch only for models in its bundled catalog; an unknown slug gets no apply_patch.
MODEL = "gpt-5.5"
API_KEY_VAR = "GW_API_KEY"
TIMEOUT = 120  # seconds for the whole `codex exec` run (it takes about a second)

CALL_ID = "call_apply_patch_1"
GREETING = "Hello from the responses-gateway e2e test"
PATCH = f"*** Begin Patch\n*** Add File: hello.txt\n+{GREETING}\n*** End Patch\n"

# Everything but the provider: shared with test_codex_builtin_provider.py, which uses the built-in one.
COMMON = """\
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

# No plugin marketplace sync (it runs `git ls-remote https://github.com/...`).
[features]
plugins = false
remote_plugin = false
apps = false
"""

CONFIG = 'model = "{model}"\nmodel_provider = "gw"\n' + COMMON + """
[model_providers.gw]
name = "Gateway under test"
base_url = "{base_url}"
env_key = "{key_var}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 30000
"""


def codex_bin() -> Path:
    explicit = os.environ.get("CODEX_BIN")
    if not explicit:
        ensure_node_modules("codex")
    path = Path(explicit) if explicit else DEFAULT_BIN
    if path.is_file():
        return path
    where = f"CODEX_BIN={explicit}" if explicit else str(path)
    needs.need("the Codex CLI", False, f"not found at {where}; install it with `{INSTALL}`")
    raise AssertionError("unreachable")  # need() skipped or failed


def split(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def run_codex(binary: Path, prompt: str, home: Path, work: Path, **extra_env: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),  # nothing of the developer's ~/.codex, ~/.gitconfig, ... leaks in
        "CODEX_HOME": str(home / ".codex"),
        API_KEY_VAR: "sk-e2e-test",
        "NO_PROXY": "127.0.0.1,localhost",  # no proxy variables are passed, but be explicit
        "LANG": "C.UTF-8",
        **extra_env,
    }
    cmd = [str(binary), "exec", "--json", "--ephemeral", "--skip-git-repo-check",
           "--dangerously-bypass-approvals-and-sandbox", prompt]
    # A session of its own: on timeout the node launcher and the native binary it spawned are killed together.
    with subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            print(f"codex stdout:\n{stdout}\ncodex stderr:\n{stderr}")
            pytest.fail(f"codex exec did not finish within {TIMEOUT} s")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def jsonl(stdout: str) -> list[dict]:
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


def test_codex_exec_applies_a_patch_through_the_gateway(gateway, upstream, tmp_path):
    binary = codex_bin()
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(
        CONFIG.format(model=MODEL, base_url=f"{gateway.url}/v1", key_var=API_KEY_VAR))
    work = tmp_path / "work"
    work.mkdir()

    # Turn 1: the call arrives in small fragments, one of them splitting the `\n` escape of the JSON string.
    arguments = json.dumps({"input": PATCH})
    cut = arguments.index("\\n") + 1
    fragments = [*split(arguments[:cut], 9), *split(arguments[cut:], 9)]
    upstream.enqueue(
        tool_calls_stream([(CALL_ID, "apply_patch", fragments)], model=MODEL,
                          usage=make_usage(prompt_tokens=9000, completion_tokens=40)),
        text_stream(["Do", "ne."], model=MODEL, usage=make_usage(prompt_tokens=9100, completion_tokens=3)),
    )

    result = run_codex(binary, "Create hello.txt", home, work)
    diagnostics = f"codex exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    if result.returncode != 0:
        print(diagnostics)
    assert result.returncode == 0, diagnostics

    # Codex ran the patch and reported it.
    hello = work / "hello.txt"
    assert hello.is_file(), diagnostics
    assert hello.read_text() == f"{GREETING}\n"

    events = jsonl(result.stdout)
    completed = [e["item"] for e in events if e.get("type") == "item.completed"]
    changes = [i for i in completed if i.get("type") == "file_change"]
    assert changes and changes[0].get("status") == "completed", diagnostics
    assert any(c.get("path", "").endswith("hello.txt") for c in changes[0].get("changes", [])), diagnostics
    messages = [i.get("text") for i in completed if i.get("type") == "agent_message"]
    assert messages and messages[-1] == "Done.", diagnostics
    assert events[-1].get("type") == "turn.completed", diagnostics
    # Codex sums the usage of the turn's two responses: the upstream's counts came through the gateway.
    usage = events[-1]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (9000 + 9100, 40 + 3), usage
    assert not [e for e in events if e.get("type") in ("error", "turn.failed")], diagnostics

    # Exactly the two upstream calls of the script: no retries, no side requests.
    requests = upstream.requests
    assert [(r.method, r.path) for r in requests] == [("POST", "/v1/chat/completions")] * 2, diagnostics
    first, second = (r.body for r in requests)
    for body in (first, second):
        assert body["model"] == MODEL
        assert body["stream"] is True

    # The custom apply_patch tool is offered as a function with one string `input`; web_search is dropped.
    tools = {t["function"]["name"]: t for t in first["tools"] if t.get("type") == "function"}
    assert len(tools) == len(first["tools"])
    assert "apply_patch" in tools, sorted(tools)
    params = tools["apply_patch"]["function"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["input"]["type"] == "string"
    assert params.get("required") == ["input"]
    assert "exec_command" in tools, sorted(tools)
    assert not [n for n in tools if "web_search" in n], sorted(tools)

    # Codex's developer instructions are merged into one leading system message.
    msgs = first["messages"]
    assert msgs[0]["role"] == "system"
    assert isinstance(msgs[0]["content"], str) and len(msgs[0]["content"]) > 1000
    assert all(m["role"] != "developer" for m in msgs)
    assert msgs[-1]["role"] == "user"
    assert "Create hello.txt" in json.dumps(msgs[-1]["content"])

    # Turn 2 replays the call and Codex's apply_patch output.
    msgs = second["messages"]
    assert msgs[0]["role"] == "system"
    at = next(i for i, m in enumerate(msgs) if m["role"] == "assistant" and m.get("tool_calls"))
    calls = msgs[at]["tool_calls"]
    assert [(c["id"], c["type"], c["function"]["name"]) for c in calls] == [(CALL_ID, "function", "apply_patch")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"input": PATCH}
    tool_msg = msgs[at + 1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["tool_call_id"] == CALL_ID
    assert "hello.txt" in tool_msg["content"], tool_msg
    assert msgs[at + 2:] == [], "nothing should follow the tool output in turn 2"
