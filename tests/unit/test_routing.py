"""routing.py alone: the routing file, checked when it is loaded."""

import pytest

from responses_gateway.routing import load_rules


def test_bad_config_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[routes]]\nmatch = "x"\nkind = "telepathy"\n')
    with pytest.raises(ValueError, match="kind must be one of"):
        load_rules(str(bad))
    bad.write_text('[[routes]]\nmatch = "x"\nbase_url = "http://h"\ncolour = "red"\n')
    with pytest.raises(ValueError, match="unknown keys"):
        load_rules(str(bad))


@pytest.mark.parametrize(("entry", "message"), [
    ('reasoning_history = "reasoning-content"',
     "routes[0]: reasoning_history must be one of reasoning_content, reasoning, drop; got 'reasoning-content'"),
    ('max_tokens_field = "max_output_tokens"',
     "routes[0]: max_tokens_field must be one of max_tokens, max_completion_tokens; got 'max_output_tokens'"),
    ('kind = "chat-completions"',
     "routes[0]: kind must be one of chat_completions, anthropic, responses, demo; got 'chat-completions'"),
    ('max_tokens = "8192"', "routes[0]: max_tokens must be an integer; got '8192'"),
    ("max_tokens = 0", "routes[0]: max_tokens must be a positive integer; got 0"),
    ("model = 42", "routes[0]: model must be a string; got 42"),
    ('read_timeout = "600"', "routes[0]: read_timeout must be a number of seconds; got '600'"),
    ("connect_timeout = true", "routes[0]: connect_timeout must be a number of seconds; got True"),
    ('computer_profile = "qwen2-vl"', "routes[0]: computer_profile must be one of pixels, ui-tars-1.5, qwen2.5-vl, "
                                      "opencua, holo, qwen3-vl, glm-4.5v; got 'qwen2-vl'"),
    ('computer_coordinates = "percent"', "routes[0]: computer_coordinates must be one of pixels, normalized_1000, "
                                         "normalized_999; got 'percent'"),
    ('computer_function = "computer_20250124"', "routes[0]: computer_function must be one of computer, "
                                                "computer_use, ui-tars; got 'computer_20250124'"),
    ("computer_max_pixels = 1e6", "routes[0]: computer_max_pixels must be an integer; got 1000000.0"),
    ("computer_min_pixels = 0", "routes[0]: computer_min_pixels must be a positive integer; got 0"),
])
def test_config_values_are_checked_at_startup(tmp_path, entry, message):
    """A typo in a route is refused when the file is loaded, naming the key and what it allows, instead of
    going upstream as a field name (or a type error on the first request)."""
    bad = tmp_path / "routes.toml"
    bad.write_text(f'[[routes]]\nmatch = "x"\nbase_url = "http://h"\n{entry}\n')
    with pytest.raises(ValueError) as info:
        load_rules(str(bad))
    assert str(info.value) == f"{bad}: {message}"


def test_config_values_that_are_right_load(tmp_path):
    good = tmp_path / "routes.toml"
    good.write_text('[[routes]]\nmatch = "x"\nbase_url = "http://h"\nreasoning_history = "drop"\n'
                    'max_tokens_field = "max_completion_tokens"\nmax_tokens = 8192\nread_timeout = 30\n'
                    'connect_timeout = 2.5\ncomputer_profile = "qwen2.5-vl"\ncomputer_coordinates = "normalized_1000"\n'
                    'computer_max_pixels = 1003520\ncomputer_min_pixels = 3136\ncomputer_function = "computer"\n')
    route = load_rules(str(good))[0].route
    assert (route.reasoning_history, route.max_tokens_field, route.max_tokens) == ("drop", "max_completion_tokens", 8192)
    assert (route.read_timeout, route.connect_timeout) == (30, 2.5)
    assert (route.computer_profile, route.computer_coordinates, route.computer_max_pixels, route.computer_min_pixels,
            route.computer_function) == ("qwen2.5-vl", "normalized_1000", 1003520, 3136, "computer")
