"""The token estimate through a real gateway: an upstream that reports no usage."""

from responses_gateway import tokens


def test_an_upstream_without_usage_gets_the_estimate(http, upstream):
    """A Chat Completions server that sends no usage chunk: the estimate instead of `usage: null` (LlamaIndex
    and Codex read it), input from the request, output from the reasoning, text and call arguments."""
    from tests.helpers import stream
    from tests.support.fake_chat import reasoning_then_text

    upstream.enqueue(reasoning_then_text(["Think it over."], ["Hello ", "there!"]))
    result = stream(http, {"model": "fake-model", "input": "Say hello.", "instructions": "Be kind."})
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}
    reasoning = tokens.char_tokens(len("Think it over."))
    assert result.response["usage"] == {
        "input_tokens": tokens.estimate([user], "Be kind."),
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": tokens.char_tokens(len("Hello there!")) + reasoning,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": tokens.estimate([user], "Be kind.") + tokens.char_tokens(len("Hello there!")) + reasoning,
    }
