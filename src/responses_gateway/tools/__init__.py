"""Tools the gateway executes itself (MCP servers)."""
