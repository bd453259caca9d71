"""The MCP client (responses_gateway.mcp) against a real MCP server written with the `mcp` SDK, on
loopback, over both transports: listing, allowed_tools, calls, structured / error / image results,
timeouts, unreachable servers, header forwarding, and the server_url safety checks (literal IPs only:
nothing here connects anywhere but 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from mcp import types as mcp_types

from responses_gateway.net.urls import check_url, safe_url
from responses_gateway.tools.mcp.declaration import MCPServer
from responses_gateway.tools.mcp.errors import MCPError
from responses_gateway.tools.mcp.results import result_to_text
from responses_gateway.tools.mcp.session import MCPSession
from tests.support.mcp_oneshot import call_tool, list_tools
from tests.support.mcp_server import CITIES

ALL_TOOLS = {"add", "echo", "lookup", "lookup_structured_only", "picture", "explode", "slow", "whoami"}


def server(url: str, **spec) -> MCPServer:
    return MCPServer.from_tool({"type": "mcp", "server_label": "test", "server_url": url, **spec})


def run(coro):
    return asyncio.run(coro)


def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- listing ---------------------------------------------------------------------------------------------


def test_list_tools_streamable_http(mcp_server):
    async def go():
        async with MCPSession(server(mcp_server.url), timeout=10) as session:
            return session.transport, await session.list_tools()

    transport, tools = run(go())
    assert transport == "streamable_http"
    assert {t["name"] for t in tools} == ALL_TOOLS
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema", "annotations"}
        assert tool["input_schema"]["type"] == "object"
    add = next(t for t in tools if t["name"] == "add")
    assert add["description"] == "Add two integers."
    assert add["input_schema"]["required"] == ["a", "b"]
    assert add["annotations"] == {"readOnlyHint": True}
    assert next(t for t in tools if t["name"] == "lookup")["annotations"] is None
    json.dumps(tools)  # plain JSON, ready for an mcp_list_tools item


def test_list_tools_sse_fallback(mcp_server):
    async def go():
        async with MCPSession(server(mcp_server.sse_url), timeout=10) as session:
            tools = await session.list_tools()
            out = await session.call_tool("add", {"a": 20, "b": 22})
            return session.transport, tools, out

    transport, tools, out = run(go())
    assert transport == "sse"
    assert {t["name"] for t in tools} == ALL_TOOLS
    assert out == ("42", False)


def test_list_tools_one_shot(mcp_server):
    tools = run(list_tools(server(mcp_server.url), timeout=10))
    assert {t["name"] for t in tools} == ALL_TOOLS


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        (["add", "echo", "nope"], {"add", "echo"}),
        ({"tool_names": ["lookup", "whoami"]}, {"lookup", "whoami"}),
        ({"read_only": True}, {"add", "echo"}),
        ({"tool_names": ["add", "lookup"], "read_only": True}, {"add"}),
        ([], set()),
    ],
)
def test_allowed_tools_filter(mcp_server, allowed, expected):
    tools = run(list_tools(server(mcp_server.url, allowed_tools=allowed), timeout=10))
    assert {t["name"] for t in tools} == expected


def test_hidden_tool_is_not_called(mcp_server):
    before = mcp_server.calls["explode"]
    with pytest.raises(MCPError, match="not allowed"):
        run(call_tool(server(mcp_server.url, allowed_tools=["add"]), "explode", {}, timeout=10))

    async def read_only_session():
        async with MCPSession(server(mcp_server.url, allowed_tools={"read_only": True}), timeout=10) as s:
            await s.list_tools()
            return await s.call_tool("explode", {})

    with pytest.raises(MCPError, match="not allowed"):
        run(read_only_session())
    assert mcp_server.calls["explode"] == before


# -- calls -----------------------------------------------------------------------------------------------


def test_call_tool_success(mcp_server):
    srv = server(mcp_server.url)
    assert run(call_tool(srv, "add", {"a": 2, "b": 3}, timeout=10)) == ("5", False)
    assert run(call_tool(srv, "echo", {"text": "héllo\nworld"}, timeout=10)) == ("héllo\nworld", False)


def test_call_tool_structured_output(mcp_server):
    srv = server(mcp_server.url)
    output, is_error = run(call_tool(srv, "lookup", {"city": "Paris"}, timeout=10))
    assert not is_error
    assert json.loads(output) == CITIES["Paris"]
    # No text part at all: the structured content becomes the JSON text.
    output, is_error = run(call_tool(srv, "lookup_structured_only", {"city": "Lyon"}, timeout=10))
    assert not is_error
    assert json.loads(output) == CITIES["Lyon"]


def test_call_tool_image_placeholder(mcp_server):
    assert run(call_tool(server(mcp_server.url), "picture", {}, timeout=10)) == ("[image: image/png]", False)


def test_call_tool_is_error(mcp_server):
    output, is_error = run(call_tool(server(mcp_server.url), "explode", {}, timeout=10))
    assert is_error is True
    assert "kaboom" in output
    output, is_error = run(call_tool(server(mcp_server.url), "lookup", {"city": "Atlantis"}, timeout=10))
    assert is_error is True
    assert "unknown city" in output


def test_call_tool_bad_arguments_is_an_error_result(mcp_server):
    output, is_error = run(call_tool(server(mcp_server.url), "add", {"a": "x"}, timeout=10))
    assert is_error is True
    assert output


def test_call_tool_timeout(mcp_server):
    t0 = time.monotonic()
    with pytest.raises(MCPError, match=r"'slow'.*timed out after 0.5s") as err:
        run(call_tool(server(mcp_server.url), "slow", {"seconds": 5}, timeout=0.5))
    assert err.value.timed_out
    assert time.monotonic() - t0 < 4


def test_session_survives_a_timed_out_call(mcp_server):
    async def go():
        async with MCPSession(server(mcp_server.url), timeout=10) as session:
            with pytest.raises(MCPError, match="timed out after 0.3s"):
                await session.call_tool("slow", {"seconds": 3}, timeout=0.3)
            return await session.call_tool("echo", {"text": "still here"})

    assert run(go()) == ("still here", False)


def test_session_reused_for_concurrent_calls_and_across_tasks(mcp_server):
    async def go():
        session = MCPSession(server(mcp_server.url), timeout=10)
        await asyncio.create_task(session.connect())  # opened in one task...
        try:
            results = await asyncio.gather(*(session.call_tool("add", {"a": i, "b": i}) for i in range(5)))
            slow = await session.call_tool("slow", {"seconds": 0.05})
        finally:
            await asyncio.create_task(session.aclose())  # ...closed in another
        return results, slow

    results, slow = run(go())
    assert results == [(str(2 * i), False) for i in range(5)]
    assert slow == ("slept 0.05s", False)


def test_unreachable_server(mcp_server):
    url = f"http://127.0.0.1:{dead_port()}/mcp?key=sekrit"
    t0 = time.monotonic()
    with pytest.raises(MCPError) as err:
        run(list_tools(server(url, authorization="tok-123"), timeout=5))
    assert time.monotonic() - t0 < 3
    message = str(err.value)
    assert "cannot connect to MCP server 'test'" in message
    assert "sekrit" not in message and "tok-123" not in message
    with pytest.raises(MCPError, match="cannot connect"):
        run(call_tool(server(url), "add", {"a": 1, "b": 2}, timeout=5))


def test_not_an_mcp_endpoint(mcp_server):
    with pytest.raises(MCPError) as err:
        run(list_tools(server(f"{mcp_server.base_url}/nowhere"), timeout=5))
    message = str(err.value)
    assert "streamable HTTP:" in message and "SSE: HTTP 404" in message


def test_connect_timeout():
    # A listener that accepts and never answers: connecting must give up at the timeout.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        t0 = time.monotonic()
        with pytest.raises(MCPError, match="timed out after 0.5s") as err:
            run(list_tools(server(url), timeout=0.5))
        assert err.value.timed_out
        assert time.monotonic() - t0 < 3
    finally:
        sock.close()


# -- headers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["url", "sse_url"])
def test_authorization_forwarded(mcp_server, transport):
    url = getattr(mcp_server, transport)
    assert run(call_tool(server(url, authorization="tok-123"), "whoami", {}, timeout=10)) == ("Bearer tok-123", False)
    explicit = server(url, authorization="ignored", headers={"authorization": "Basic abc"})
    assert run(call_tool(explicit, "whoami", {}, timeout=10)) == ("Basic abc", False)
    assert run(call_tool(server(url), "whoami", {}, timeout=10)) == ("<none>", False)


def test_from_tool_and_secrets():
    srv = MCPServer.from_tool(
        {
            "type": "mcp",
            "server_label": "deepwiki",
            "server_url": "https://mcp.example.com/mcp",
            "headers": {"X-Api-Key": "key-999"},
            "authorization": "tok-123",
            "allowed_tools": {"tool_names": ["ask"], "read_only": True},
            "require_approval": {"never": {"tool_names": ["ask"]}},
            "server_description": "docs",
        }
    )
    assert srv.label == "deepwiki" and srv.url == "https://mcp.example.com/mcp"
    assert srv.headers == {"X-Api-Key": "key-999", "Authorization": "Bearer tok-123"}
    assert srv.allowed_tools == ["ask"] and srv.read_only is True and srv.description == "docs"
    for text in (repr(srv), json.dumps(srv.public_tool())):
        assert "tok-123" not in text and "key-999" not in text
    assert srv.public_tool()["allowed_tools"] == {"read_only": True, "tool_names": ["ask"]}
    assert srv.requires_approval("ask") is False
    assert srv.requires_approval("other") is True
    assert server("http://x/mcp").requires_approval("any") is True  # OpenAI's default: always
    assert server("http://x/mcp", require_approval="never").requires_approval("any") is False
    always = server("http://x/mcp", require_approval={"always": {"tool_names": ["rm"]}, "never": {"read_only": True}})
    assert always.requires_approval("ls", {"readOnlyHint": True}) is False
    assert always.requires_approval("rm") is True
    assert server("http://x/mcp", authorization="Bearer abc").headers == {"Authorization": "Bearer abc"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"server_url": "http://x"}, "server_label is required"),
        ({"server_label": "a"}, "server_url is required"),
        ({"server_label": "a", "connector_id": "connector_gmail"}, "connector_id is not supported"),
        ({"server_label": "a", "server_url": "http://x", "headers": {"a": 1}}, "headers must be"),
        ({"server_label": "a", "server_url": "http://x", "headers": {"X-Key": "sekrit\r\nX-Evil: 1"}}, "invalid value"),
        ({"server_label": "a", "server_url": "http://x", "headers": {"Bad Name": "v"}}, "invalid header name"),
        ({"server_label": "a", "server_url": "http://x", "authorization": "tok\n"}, "invalid value"),
        ({"server_label": "a", "server_url": "http://x", "allowed_tools": "add"}, "allowed_tools must be"),
        ({"server_label": "a", "server_url": "http://x", "require_approval": "sometimes"}, "require_approval"),
    ],
)
def test_from_tool_rejects(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        MCPServer.from_tool({"type": "mcp", **spec})
    assert "sekrit" not in str(err.value)


# -- server_url safety -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8000/mcp", "loopback"),
        ("http://[::1]:8000/mcp", "loopback"),
        ("http://[::ffff:127.0.0.1]/mcp", "loopback"),
        ("http://localhost:8000/mcp", "loopback"),
        ("http://127.1/mcp", "loopback"),  # short and decimal forms resolve (locally) to 127.0.0.1
        ("http://2130706433/mcp", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/mcp", "private"),
        ("https://192.168.0.10/mcp", "private"),
        ("http://172.16.5.4/mcp", "private"),
        ("http://0.0.0.0:8000/mcp", "unspecified"),
        ("http://224.0.0.1/mcp", "multicast"),
        ("http://240.0.0.1/mcp", "reserved"),
        ("http://[fe80::1]/mcp", "link-local"),
        # Special-purpose ranges Python 3.11's ipaddress flags miss, and IPv6 forms that embed an IPv4 address
        ("http://192.0.0.8/mcp", "IETF protocol assignment"),
        ("http://192.0.0.170/mcp", "IETF protocol assignment"),
        ("http://100.64.1.2/mcp", "shared"),
        ("http://198.18.0.1/mcp", "benchmarking"),
        ("http://[2002:7f00:1::]/mcp", r"loopback \(embedded 127\.0\.0\.1\)"),
        ("http://[2002:0808:0808::]/mcp", "6to4"),
        ("http://[64:ff9b::7f00:1]/mcp", r"loopback \(embedded 127\.0\.0\.1\)"),
        ("http://[64:ff9b::808:808]/mcp", "NAT64"),
        ("http://[64:ff9b:1::a00:1]/mcp", "NAT64"),
        ("http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/mcp", r"private \(embedded 10\.0\.0\.1\)"),  # Teredo
        ("http://[::ffff:169.254.169.254]/mcp", "link-local"),
        ("http://[::127.0.0.1]/mcp", "loopback"),
        ("http://[fd00::1]/mcp", "unique local"),
        ("http://[2001:db8::1]/mcp", "documentation"),
        ("http://[::]/mcp", "unspecified"),
        ("file:///etc/passwd", "must be http or https"),
        ("ftp://example.com/mcp", "must be http or https"),
        ("mcp.example.com/mcp", "must be http or https"),
        ("http:///mcp", "no host"),
        ("http://127.0.0.1:99999/mcp", "not a valid URL"),
    ],
)
def test_check_url_refuses(url, reason):
    with pytest.raises(ValueError, match=reason):
        run(check_url(url, []))


@pytest.mark.parametrize(
    ("url", "allow"),
    [
        ("http://127.0.0.1:8000/mcp", ["127.0.0.1"]),
        ("http://127.0.0.1:8000/mcp", ["127.0.0.1:8000"]),
        ("http://localhost:8000/mcp", ["localhost"]),
        ("http://LOCALHOST:8000/mcp", ["localhost"]),
        ("http://[::1]:8000/mcp", ["::1"]),
        ("http://[::1]:8000/mcp", ["[::1]:8000"]),
        ("http://10.1.2.3/mcp", ["10.0.0.0/8"]),
        ("https://8.8.8.8/mcp", []),  # public literal: allowed without any resolution or connection
    ],
)
def test_check_url_allows(url, allow):
    run(check_url(url, allow))


def test_check_url_allow_list_is_exact():
    with pytest.raises(ValueError, match="loopback"):
        run(check_url("http://127.0.0.1:8000/mcp", ["127.0.0.1:9000", "localhost"]))
    with pytest.raises(ValueError, match="private"):
        run(check_url("http://10.1.2.3/mcp", ["10.1.2.30", "192.168.0.0/16"]))


def test_check_url_unresolvable():
    with pytest.raises(ValueError, match="cannot resolve host"):
        run(check_url("http://no-such-host.invalid/mcp", []))


def test_safe_url():
    assert safe_url("https://user:pw@h.example:8443/p/mcp?key=s#f") == "https://h.example:8443/p/mcp"
    assert safe_url("http://[::1]:80/mcp") == "http://[::1]:80/mcp"


# -- result conversion -----------------------------------------------------------------------------------


def test_result_to_text():
    T = mcp_types
    text = T.TextContent(type="text", text="a")
    assert result_to_text(T.CallToolResult(content=[text, T.TextContent(type="text", text="b")])) == "a\nb"
    assert result_to_text(T.CallToolResult(content=[], structured_content={"x": [1, "é"]})) == '{"x": [1, "é"]}'
    assert result_to_text(T.CallToolResult(content=[text], structured_content={"x": 1})) == "a"
    assert result_to_text(T.CallToolResult(content=[])) == ""
    image = T.ImageContent(type="image", data="AAAA", mime_type="image/png")
    assert result_to_text(T.CallToolResult(content=[image], structured_content={"n": 1})) == '{"n": 1}\n[image: image/png]'
    embedded = T.EmbeddedResource(
        type="resource", resource=T.TextResourceContents(uri="file:///r.txt", text="inside", mime_type="text/plain")
    )
    blob = T.EmbeddedResource(type="resource", resource=T.BlobResourceContents(uri="file:///r.bin", blob="AAAA"))
    audio = T.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")
    assert result_to_text(T.CallToolResult(content=[embedded, blob, audio])) == (
        "inside\n[resource: file:///r.bin]\n[audio: audio/wav]"
    )


def test_dns_rebinding_cannot_redirect_the_connection(mcp_server, monkeypatch):
    """The resolver answers the admitted 127.0.0.1 first and 127.0.0.2 (where nothing listens) afterwards: the
    session connects to the address that was checked, and never asks the resolver again."""
    real = socket.getaddrinfo
    lookups = []

    def rebinding(host, port, *args, **kwargs):
        if (host.decode() if isinstance(host, bytes) else host) != "rebind.test":  # anyio passes bytes
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return real("127.0.0.1" if len(lookups) == 1 else "127.0.0.2", port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = mcp_server.url.replace("127.0.0.1", "rebind.test")

    async def go():
        address = await check_url(url, ["127.0.0.1/32"])
        assert address == "127.0.0.1"
        # (the test server's own rebinding guard checks Host: send the name it knows)
        host = {"Host": mcp_server.base_url.removeprefix("http://")}
        async with MCPSession(server(url, headers=host), timeout=10, address=address) as session:
            assert {t["name"] for t in await session.list_tools()} >= {"add", "echo"}
        with pytest.raises(MCPError, match="cannot connect"):  # unpinned, the second lookup would have redirected it
            async with MCPSession(server(url, headers=host), timeout=10) as session:
                await session.list_tools()

    run(go())
    assert len(lookups) == 2  # the check, then only the unpinned session
