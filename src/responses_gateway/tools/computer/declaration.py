"""What a request declares of computer use, as the kit parses it (kit.py) and the runner uses it."""

from __future__ import annotations

from dataclasses import dataclass

PREVIEW = "computer_use_preview"


@dataclass(frozen=True)
class Display:
    """The declaration: its shape, and the display's size and environment when it says them."""

    shape: str  # computer_use_preview | computer
    width: int | None
    height: int | None
    environment: str | None
