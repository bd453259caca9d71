"""tools/computer/profiles.py: each family's frame, mapped to the display's pixels and back; a route's changes."""

from __future__ import annotations

import pytest

from responses_gateway.route import COMPUTER_PROFILES, Route
from responses_gateway.tools.computer.profiles import (
    PROFILES,
    Fit,
    Profile,
    SmartResize,
    for_route,
    smart_resize,
)

SCREEN = (1280, 800)


def test_every_profile_name_a_route_may_give_has_a_profile():
    assert tuple(PROFILES) == COMPUTER_PROFILES


def test_smart_resize_as_qwens_processor_does():
    assert smart_resize(800, 1280, max_pixels=12845056) == (812, 1288)  # multiples of 28, nearest
    h, w = smart_resize(2160, 3840, max_pixels=1003520)  # a 4K screen on a small budget: scaled down
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 1003520 and abs(w / h - 16 / 9) < 0.05
    assert smart_resize(10, 10) == (56, 56)  # at least min_pixels
    # UI-TARS-1.5's lower bound (100 * 28 * 28): a small screen is scaled up
    assert SmartResize(100 * 28 * 28, 16384 * 28 * 28).apply(200, 150) == (336, 252)


def test_fit_scales_down_as_anthropics_api_does():
    assert Fit(1568, 1_150_000).apply(1280, 800) == (1280, 800)  # within the limits: as it is
    w, h = Fit(1568, 1_150_000).apply(1920, 1080)
    assert w * h <= 1_150_000 and abs(w / h - 16 / 9) < 0.01 and w == 1430
    assert Fit(1568, 10_000_000).apply(3000, 1000) == (1568, 523)  # the long side


@pytest.mark.parametrize("name, model, display", [
    ("pixels", (17, 23), (17, 23)),
    ("qwen3-vl", (500, 250), (640, 200)),
    ("glm-4.5v", (999, 999), (1279, 799)),
    ("qwen2.5-vl", (1288, 812), (1279, 799)),  # the resized image's far edge: clamped to the display
    ("qwen2.5-vl", (644, 406), (640, 400)),
    ("ui-tars-1.5", (644, 406), (640, 400)),
])
def test_to_display(name, model, display):
    assert PROFILES[name].to_display(*model, SCREEN, SCREEN) == display


def test_a_hidpi_screenshot_maps_to_the_declared_display():
    """The model saw a 2560x1600 screenshot of a 1280x800 display: its pixels are halved for the client."""
    assert Profile().to_display(1000, 500, (2560, 1600), SCREEN) == (500, 250)
    assert Profile().to_model(500, 250, (2560, 1600), SCREEN) == (1000, 500)


@pytest.mark.parametrize("name", COMPUTER_PROFILES)
def test_a_display_point_goes_to_the_models_frame_and_back_within_a_pixel(name):
    profile = PROFILES[name]
    for x, y in ((0, 0), (640, 400), (1279, 799), (33, 771)):
        mx, my = profile.to_model(x, y, SCREEN, SCREEN)
        assert profile.inside(mx, my, SCREEN)
        back = profile.to_display(mx, my, SCREEN, SCREEN)
        assert abs(back[0] - x) <= 2 and abs(back[1] - y) <= 2


def test_inside_is_the_frames_range():
    assert PROFILES["qwen3-vl"].inside(1000, 0, SCREEN) and not PROFILES["qwen3-vl"].inside(1001, 0, (1, 1))
    assert not Profile().inside(1280, 0, SCREEN)  # pixels: exclusive


def test_a_route_changes_its_profile_part_by_part():
    assert for_route(None, "glm-4.5v") == PROFILES["glm-4.5v"]
    assert for_route(Route(kind="chat_completions"), "pixels") == Profile()
    assert for_route(Route(kind="chat_completions", computer_profile="qwen3-vl"), "pixels") == PROFILES["qwen3-vl"]
    route = Route(kind="chat_completions", computer_profile="qwen2.5-vl", computer_max_pixels=1003520)
    assert for_route(route, "pixels") == Profile("pixels", SmartResize(56 * 56, 1003520), "computer_use")
    route = Route(kind="chat_completions", computer_coordinates="normalized_1000", computer_function="computer")
    assert for_route(route, "qwen2.5-vl").coordinates == "normalized_1000"
    assert for_route(route, "qwen2.5-vl").function == "computer"
    # a resize given to a profile without one: Qwen's processor with those bounds
    route = Route(kind="chat_completions", computer_min_pixels=3136, computer_max_pixels=500_000)
    assert for_route(route, "pixels").resize == SmartResize(3136, 500_000)
