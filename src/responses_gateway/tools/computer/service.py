"""Computer use's part of one process: the deployment's policy (settings.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..frame import Start
from .settings import ComputerSettings


@dataclass(frozen=True)
class Computer:
    settings: ComputerSettings

    def describe(self) -> str:
        keep = self.settings.computer_keep_screenshots
        deny = ", ".join(self.settings.deny()) or "none"
        return (f"default coordinates {self.settings.computer_profile}, the last {keep} screenshots kept, "
                f"denied domains: {deny}")

    async def aclose(self) -> None:
        """Nothing is kept between responses."""


async def serve(start: Start[ComputerSettings]) -> Computer:
    return Computer(start.group)
