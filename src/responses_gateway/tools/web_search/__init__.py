"""The web_search kit (tools/frame.py): `{"type": "web_search"}` (and `web_search_preview`, the dated aliases) run
by the gateway, through the search providers the deployment configures (docs/web-search.md).

Importing this package costs nothing: `kit` and `options` serve every request (parse, echo, lower, include);
the runner and what it uses (providers, fetcher, extraction) are imported when a request declares the tool.

- `options.Options`: the declaration, checked at the request boundary (filters, user_location,
  search_context_size, external_web_access) and echoed with OpenAI's defaults;
- `domains.DomainPolicy`: which hosts results and pages may come from (the deployment's allow / deny lists and
  the request's `filters`), subdomains included;
- `config`: the providers of a deployment (`--web-search`, the routing file's `[web_search]`), a fallback chain;
- `searxng`, `brave`, `tavily`, `exa`, `mcp`: one module per provider, each speaking its public HTTP API (or an
  MCP server's search tool);
- `service.WebSearch`: the process's providers, their rate limits and result caches, the fallback chain;
- `fetch`: a page fetched behind the SSRF guard (net/), size, time and content-type bounded, redirects re-checked;
  `extract`: its readable text; `render`: what the model is shown, fetched text marked as untrusted data;
- `citations.Citations`: `url_citation` annotations for the markdown links the answer makes to what this
  response found, while it streams;
- `runner.WebSearchRunner`: the model's calls (search, open_page, find_in_page) in one response.
"""
