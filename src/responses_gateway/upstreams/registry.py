"""Route kind → adapter: the one table of the upstream protocols the gateway speaks.

A new kind of upstream is one adapter module (docs/adapters.md), one line in `ADAPTERS`, and its name in
`RouteKind`; the routing file, `--upstream` and the router all build their adapters here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from .anthropic import AnthropicUpstream
from .base import Route, RouteKind, Upstream
from .chat_completions import ChatCompletionsUpstream
from .demo import DemoUpstream
from .responses import ResponsesUpstream

ADAPTERS: dict[str, Callable[[Route], Upstream]] = {
    "chat_completions": ChatCompletionsUpstream,
    "anthropic": AnthropicUpstream,
    "responses": ResponsesUpstream,
    "demo": DemoUpstream,
}
assert set(ADAPTERS) == set(get_args(RouteKind)), "every RouteKind needs its adapter, and no more"


def build_upstream(route: Route) -> Upstream:
    return ADAPTERS[route.kind](route)
