"""Connecting to URLs that requests name, safely: shared by every gateway-run tool that reaches out (MCP servers,
web pages).

- `urls.check_url`: refuses a URL whose host is (or resolves to) an address inside the operator's network
  (loopback, private, link-local, ... every special-purpose range) unless the operator allowed it, and returns
  the address it checked;
- `pinning`: an HTTP client that connects to exactly that address (no second lookup: DNS rebinding cannot
  redirect it), while the Host header, TLS SNI and certificate checks keep the hostname;
- `urls.safe_url`: a URL without userinfo, query or fragment, for messages and logs.
"""
