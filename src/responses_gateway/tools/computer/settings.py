"""Computer use's settings (docs/computer-use.md), declared once (settings.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...route import COMPUTER_PROFILES
from ...settings import setting


@dataclass(frozen=True)
class ComputerSettings:
    """Computer use (docs/computer-use.md)"""

    computer_profile: str = setting(
        "pixels", choices=COMPUTER_PROFILES,
        help="the coordinates a vision model's computer actions use, where its route does not say "
             "(computer_profile in --config): pixels, or a model family's",
        doc="the coordinates a vision model's computer actions use where its route does not say "
            "(`computer_profile` of a `[[routes]]` entry): `pixels` of the screenshot, or a family's profile "
            "([docs/computer-use.md](docs/computer-use.md#coordinate-profiles))")
    computer_keep_screenshots: int = setting(
        3, check="positive",
        help="screenshots the model keeps in its context; older ones become a line of text")
    computer_deny_domains: str | None = setting(
        None, metavar="D1,D2",
        help="pages on these domains (and subdomains), as the client's current_url says, raise a pending "
             "safety check the client must acknowledge")
    max_image_bytes: int = setting(
        8 * 1024 * 1024, check="positive", shown="8 MiB",
        help="the largest screenshot a computer_call_output may carry (400 beyond)")

    def deny(self) -> tuple[str, ...]:
        return tuple(d.strip().lower().lstrip(".") for d in (self.computer_deny_domains or "").split(",")
                     if d.strip())
