"""Gateway-run tools: the tools a request declares that the gateway itself runs between upstream steps.

- `frame`: what a tool is (a `Kit`) and does in one response (a `Runner`), and the `Annotator` of citations;
- `kits`: the registry of kits, and which of them a deployment can run (`Toolbox`);
- `loop`: the upstream steps of a response whose model calls them;
- `history`: their items as upstreams see them, and as clients are shown them (`include[]`);
- `mcp/`: remote MCP servers.

docs/architecture.md walks through adding a tool.
"""
