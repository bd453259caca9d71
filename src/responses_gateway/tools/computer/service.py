"""Computer use's part of one process: the deployment's policy (settings.py) and each route's profile."""

from __future__ import annotations

from dataclasses import dataclass

from ...route import Route
from ..frame import Start
from .profiles import Profile, for_route
from .settings import ComputerSettings


@dataclass(frozen=True)
class Computer:
    settings: ComputerSettings

    def profile(self, route: Route | None) -> Profile:
        """The coordinate profile of a route's model: its own, else the deployment's default."""
        return profile_for(route, self.settings)

    def describe(self) -> str:
        keep = self.settings.computer_keep_screenshots
        deny = ", ".join(self.settings.deny()) or "none"
        return (f"default coordinates {self.settings.computer_profile}, the last {keep} screenshots kept, "
                f"denied domains: {deny}")

    async def aclose(self) -> None:
        """Nothing is kept between responses."""


def profile_for(route: Route | None, settings: ComputerSettings) -> Profile:
    return for_route(route, settings.computer_profile)


async def serve(start: Start[ComputerSettings]) -> Computer:
    return Computer(start.group)
