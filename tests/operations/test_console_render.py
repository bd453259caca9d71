"""What the console renders of stored text: escaped, secrets redacted (console/html.py, console/render.py)."""

from __future__ import annotations

from responses_gateway.console.html import href, pretty, redacted
from responses_gateway.console.render import item, thread


def test_a_declared_secret_is_never_shown():
    tools = [{"type": "mcp", "server_url": "https://mcp.example", "authorization": "Bearer sk-live-123",
              "headers": {"X-Api-Key": "sk-live-456"}, "openai_api_key": "sk-live-789", "require_approval": "never"}]
    shown = pretty({"tools": tools})
    assert "sk-live" not in shown and shown.count("[redacted]") == 3 and "mcp.example" in shown
    assert redacted({"max_output_tokens": 5, "usage": {"total_tokens": 9}}) == {"max_output_tokens": 5,
                                                                                  "usage": {"total_tokens": 9}}


def test_every_kind_of_item_escapes_its_text():
    hostile = '<script>alert(1)</script>"\'&'
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": hostile}]},
             {"type": "message", "role": hostile, "content": hostile},
             {"type": "function_call", "name": hostile, "call_id": hostile, "arguments": hostile},
             {"type": "function_call", "name": "f", "call_id": "c", "arguments": '{"x": "<img src=x>"}'},
             {"type": "function_call_output", "call_id": "c", "output": hostile},
             {"type": "reasoning", "summary": [{"type": "summary_text", "text": hostile}]},
             {"type": hostile, "id": hostile, "status": hostile, "anything": hostile}]
    html = thread(items) + item("<i>not a dict</i>")
    assert "<script>" not in html and "<img" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert href("responses", '"><script>') == "/console/responses/%22%3E%3Cscript%3E"
