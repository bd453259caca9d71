"""The MCP kit (tools/frame.py): the MCP servers a request declares, run by the gateway: connect, list their
tools, call them.

Built on the official `mcp` SDK (2.x). Importing this package costs nothing: the modules that import the
SDK (about 25 MiB and 0.6 s) are imported only when a request declares an MCP tool (`runner` and what it
uses), while `kit` and `history` (MCP items as plain tool calls) serve every request.

- `session.MCPSession`: one connection (streamable HTTP, falling back to legacy SSE) for a listing and
  any number of calls;
- `net.urls.check_url` (shared with web_search): refuses server URLs that point inside the operator's network;
- `results`: the SDK's results as the `mcp_list_tools` / `mcp_call` items carry them;
- `errors.MCPError`: every failure, as a readable message that never contains header values, the
  authorization token, or the URL's query string / userinfo;
- `runner.MCPRunner`: the servers of one response (listings, calls) in the tool loop; `history.lower`: what
  upstreams see;
- `declaration.MCPServer`: the `{"type": "mcp"}` declaration, checked at the request boundary.
"""
