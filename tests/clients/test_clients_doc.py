"""docs/clients.md, run as a reader would copy it: the gateway started by the page's own command (the demo model,
a search provider — the fake SearXNG on loopback stands for the page's), then every code block of every client's
section against it — Python with this environment (LlamaIndex with its own), JavaScript with node and the
client's packages from tests/e2e/<client>, the Codex CLI with each config.toml of the page and the commands
under it. A block that fails, or that no longer prints what the demo's answer to it is, fails here; so does a
block this test does not know how to run."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import needs, snippets
from tests.support.node import require_node_packages

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "clients.md"
BLOCKS = snippets.blocks(DOC)
GATEWAY = "http://127.0.0.1:8080"  # where the page's snippets reach the gateway
SEARXNG = "http://127.0.0.1:8888"  # the page's search provider
FOUND = "[demo] web_search found “Interest rates & the Fed – Example News” ([127.0.0.1]("
TIMEOUT = 180


@dataclass(frozen=True)
class Client:
    """How a section's blocks run, and what each prints (in order: one list of expected pieces per block)."""

    run: str  # "python", "llamaindex", "node", "codex"
    expect: tuple[tuple[str, ...], ...]
    node: tuple[str, ...] = ()  # for "node": the tests/e2e folder and the packages it needs


CLIENTS = {
    "Codex CLI": Client("codex", ((FOUND,), (FOUND,))),
    "openai-python": Client("python", (
        ("You said: Say hello.", "reasoning\nweb_search_call\nreasoning\n", "type='url_citation'", FOUND),
        ("[demo] file_search found in policy.txt: “Refunds are accepted within 30 days of delivery.”",
         "type='file_citation'"))),
    "openai-node": Client("node", ((FOUND, "[ 'reasoning', 'web_search_call', 'reasoning', 'message' ]",
                                    "print(2**100)", "1267650600228229401496703205376\\n",
                                    "[demo] code_interpreter returned: 1267650600228229401496703205376"),),
                          node=("openai-node", "openai")),
    "Agents SDK (Python)": Client("python", (("[demo] get_weather returned: 18°C and sunny in Paris", FOUND),)),
    "Agents SDK (JavaScript)": Client("node", (("[demo] get_weather returned: 18°C and sunny in Paris", FOUND),),
                                      node=("agents-js", "@openai/agents", "zod")),
    "Vercel AI SDK": Client("node", ((FOUND, "/pages/article", "[ 'web_search ran by the gateway: true' ]"),),
                            node=("vercel", "ai", "@ai-sdk/openai")),
    "LangChain": Client("python", (("You said: Say hello.", FOUND, "'server_tool_call'"),)),
    "LlamaIndex": Client("llamaindex", ((FOUND,),)),
    "pydantic-ai": Client("python", (("You said: Say hello.", FOUND),)),
    "LiteLLM": Client("python", (("['reasoning', 'web_search_call', 'reasoning', 'message']", FOUND),)),
}


def serve_command() -> snippets.Block:
    (command,) = [b for b in BLOCKS if b.lang == "sh" and b.code.startswith("responses-gateway serve")]
    return command


def test_every_block_of_the_page_is_run_here():
    """A block in a section this test does not know, or one more than it expects, would go unrun: it fails."""
    command = serve_command()
    runnable = {"codex": ("toml", "sh"), "python": ("python",), "llamaindex": ("python",), "node": ("js",)}
    for block in BLOCKS:
        if block is command:
            continue
        assert block.section in CLIENTS, f"{block.where(DOC)}: no test runs this section's blocks"
        assert block.lang in runnable[CLIENTS[block.section].run], f"{block.where(DOC)}: not run"
    for section, client in CLIENTS.items():
        run = [b for b in BLOCKS if b.section == section and b.lang != "toml"]
        assert len(run) == len(client.expect), f"{section}: {len(run)} blocks, {len(client.expect)} expected outputs"


@dataclass
class Gateway:
    url: str
    log: Path

    def websocket_connections(self) -> float:
        for line in httpx.get(f"{self.url}/metrics").text.splitlines():
            if line.startswith("responses_gateway_websocket_connections_total "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@pytest.fixture(scope="module")
def doc_gateway(_fake_web, tmp_path_factory) -> Iterator[Gateway]:
    """`responses-gateway serve ...` as the page writes it, on a free port and a fresh database."""
    from tests.operations.test_cli import free_port
    from tests.support.server import wait_healthy

    args = shlex.split(snippets.localize(serve_command().code, {SEARXNG: f"{_fake_web.url}/searxng"}))
    assert args[:2] == ["responses-gateway", "serve"], args
    where = tmp_path_factory.mktemp("clients-doc")
    port = free_port()
    log = where / "gateway.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "responses_gateway", *args[1:], "--port", str(port),
                                 "--db", str(where / "responses.db")], stdout=out, stderr=subprocess.STDOUT)
    gateway = Gateway(f"http://127.0.0.1:{port}", log)
    try:
        if not wait_healthy(gateway.url, proc):
            pytest.fail(f"the page's command did not start a gateway: {log.read_text()}")
        yield gateway
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_python(python: str, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # LiteLLM's price list: no download at import
    if python != sys.executable:  # an environment of its own (LlamaIndex's): none of this one's paths
        env["PYTHONPATH"] = ""
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, env=env)


def run_node(folder: str, packages: tuple[str, ...], code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The block as an ES module in a folder of its own that sees the client's packages (tests/e2e/<folder>)."""
    node = require_node_packages(folder, *packages)
    (cwd / "node_modules").symlink_to(ROOT / "tests" / "e2e" / folder / "node_modules")
    (cwd / "app.mjs").write_text(code)
    return subprocess.run([node, "app.mjs"], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)


def llamaindex_python() -> str:
    from tests.clients.test_llamaindex import environment

    return str(environment())


def run_codex(config: str, commands: str, where: Path) -> subprocess.CompletedProcess[str]:
    """The page's config.toml (with the test's offline settings around it: no update check, no analytics) in a
    fresh CODEX_HOME, and its commands run by bash in a fresh git repository, as a reader's shell would."""
    from tests.clients.test_codex_e2e import COMMON, codex_bin

    binary = codex_bin()
    top, _, tables = COMMON.partition("\n[")
    home = where / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(f"{top}\n{config}\n[{tables}")
    work = where / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    env = {"PATH": f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home),
           "LANG": "C.UTF-8", "NO_PROXY": "127.0.0.1,localhost"}
    # a session of its own: on timeout bash, Codex's node launcher and its native binary are killed together
    with subprocess.Popen(["bash", "-euc", commands], cwd=work, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("section", list(CLIENTS))
def test_the_clients_snippets_run_against_the_gateway(section, doc_gateway, tmp_path):
    client = CLIENTS[section]
    blocks = [b for b in BLOCKS if b.section == section]
    put = {GATEWAY: doc_gateway.url}
    if client.run == "codex":
        runs = []
        for config, commands in zip(blocks[0::2], blocks[1::2], strict=True):
            assert (config.lang, commands.lang) == ("toml", "sh"), section
            opened = doc_gateway.websocket_connections()
            done = run_codex(snippets.localize(config.code, put), commands.code, tmp_path / f"run{config.line}")
            # each setup speaks the Responses WebSocket, as the page says
            runs.append((commands, done, doc_gateway.websocket_connections() > opened))
    else:
        runs = []
        for block in blocks:
            code = snippets.localize(block.code, put)
            if "code_interpreter" in code:
                needs.bubblewrap()
            cwd = tmp_path / f"block{block.line}"
            cwd.mkdir()
            if client.run == "node":
                done = run_node(client.node[0], client.node[1:], code, cwd)
            else:
                done = run_python(llamaindex_python() if client.run == "llamaindex" else sys.executable, code, cwd)
            runs.append((block, done, True))
    for (block, done, websocket), expected in zip(runs, client.expect, strict=True):
        detail = f"{block.where(DOC)} exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
        assert done.returncode == 0, detail
        for piece in expected:
            assert piece in done.stdout, f"{piece!r} not printed by {detail}"
        assert websocket, f"no WebSocket connection: {detail}"
    assert " ERROR " not in doc_gateway.log.read_text(), doc_gateway.log.read_text()

