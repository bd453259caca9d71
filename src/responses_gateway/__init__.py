"""responses-gateway: the OpenAI Responses API in front of any model server."""

__version__ = "0.1.0"
