"""tools/computer/functions.py: the function each profile's model is offered, and its calls written back."""

from __future__ import annotations

from responses_gateway.tools.computer.actions import Frame, from_model
from responses_gateway.tools.computer.functions import arguments, description, parameters
from responses_gateway.tools.computer.profiles import PROFILES, Profile

SCREEN = (1280, 800)


def test_the_generic_function_says_the_models_frame():
    assert "(1280x800)" in description(Frame(Profile(), SCREEN), several=False)
    assert "0 to 1000" in description(Frame(Profile("normalized_1000"), SCREEN), False)
    assert "0 to 999" in description(Frame(PROFILES["glm-4.5v"], SCREEN), False)
    assert "(1288x812)" in description(Frame(PROFILES["ui-tars-1.5"], SCREEN), False)  # the resized screenshot
    assert "several actions" in description(Frame(Profile(), None), several=True)
    assert set(parameters(Frame(Profile(), None), several=True)["properties"]) == {"actions"}


def test_qwens_computer_use_function_names_the_resolution_in_the_models_frame():
    qwen3 = Frame(PROFILES["qwen3-vl"], SCREEN)
    assert "The screen's resolution is 1000x1000." in description(qwen3, several=False)
    assert "The screen's resolution is 1288x812." in description(Frame(PROFILES["qwen2.5-vl"], SCREEN), False)
    assert "resolution" not in description(Frame(PROFILES["qwen3-vl"], None), False)  # not known yet
    assert "left_click" in parameters(qwen3, several=True)["properties"]["action"]["enum"]


def test_a_call_written_back_reads_as_the_model_wrote_it():
    """What a model writes, read (actions.py) and written back (functions.py), is what it wrote."""
    for name, written in (
        ("qwen3-vl", {"action": "left_click", "coordinate": [500, 250]}),
        ("qwen3-vl", {"action": "key", "keys": ["ctrl", "c"]}),
        ("qwen3-vl", {"action": "scroll", "coordinate": [500, 500], "pixels": 200}),
        ("qwen2.5-vl", {"action": "mouse_move", "coordinate": [644, 406]}),
        ("qwen2.5-vl", {"action": "type", "text": "hello"}),
        ("pixels", {"action": "click", "button": "right", "x": 3, "y": 4}),
        ("glm-4.5v", {"action": "double_click", "x": 333, "y": 111}),
    ):
        frame = Frame(PROFILES[name], SCREEN)
        assert arguments(from_model(written, frame), frame, several=False) == written, name
    frame = Frame(Profile(), SCREEN)
    several = {"actions": [{"action": "type", "text": "a"}, {"action": "keypress", "keys": ["enter"]}]}
    assert arguments(from_model(several, frame), frame, several=True) == several
