"""tokens.py alone: the documented estimate."""

from responses_gateway import tokens


def test_text_rounds_up_to_whole_tokens():
    assert tokens.text_tokens("") == 0
    assert tokens.text_tokens("abcd") == 1
    assert tokens.text_tokens("abcde") == 2


def test_estimate_counts_text_not_framing_keys():
    short = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "abcd"}]}
    long = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "abcd" + "x" * 400}]}
    assert tokens.item_tokens(long) - tokens.item_tokens(short) == 100
    assert tokens.estimate([short, long]) == tokens.item_tokens(short) + tokens.item_tokens(long)


def test_instructions_and_tools_count():
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    base = tokens.estimate([])
    assert tokens.estimate([], instructions="y" * 40) == base + tokens.ITEM_OVERHEAD + 10
    assert tokens.estimate([], tools=[tool]) > base
