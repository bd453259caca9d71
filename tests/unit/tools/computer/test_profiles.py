"""tools/computer/profiles.py: each family's frame, mapped to the display's pixels and back."""

from __future__ import annotations

import pytest

from responses_gateway.tools.computer.profiles import Profile, smart_resize


def test_smart_resize_as_qwens_processor_does():
    assert smart_resize(800, 1280, max_pixels=12845056) == (812, 1288)  # multiples of 28, nearest
    h, w = smart_resize(2160, 3840, max_pixels=1003520)  # a 4K screen on a small budget: scaled down
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 1003520 and abs(w / h - 16 / 9) < 0.05
    assert smart_resize(10, 10) == (56, 56)  # at least min_pixels


@pytest.mark.parametrize("name, model, display", [
    ("pixels", (17, 23), (17, 23)),
    ("qwen3-vl", (500, 250), (640, 200)),
    ("glm-4.5v", (999, 999), (1279, 799)),
    ("qwen2.5-vl", (1288, 812), (1279, 799)),  # the resized image's far edge: clamped to the display
])
def test_to_display(name, model, display):
    assert Profile.named(name).to_display(*model, 1280, 800) == display


@pytest.mark.parametrize("name", ["pixels", "qwen3-vl", "glm-4.5v", "qwen2.5-vl", "ui-tars-1.5"])
def test_a_display_point_goes_to_the_models_frame_and_back_within_a_pixel(name):
    profile = Profile.named(name)
    for x, y in ((0, 0), (640, 400), (1279, 799), (33, 771)):
        mx, my = profile.to_model(x, y, 1280, 800)
        assert profile.inside(mx, my, 1280, 800)
        back = profile.to_display(mx, my, 1280, 800)
        assert abs(back[0] - x) <= 2 and abs(back[1] - y) <= 2


def test_inside_is_the_frames_range():
    assert Profile.named("qwen3-vl").inside(1000, 0, 1280, 800) and not Profile.named("qwen3-vl").inside(1001, 0, 1, 1)
    assert not Profile().inside(1280, 0, 1280, 800)  # pixels: exclusive
