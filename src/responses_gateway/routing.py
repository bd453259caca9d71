"""Routing: which upstream serves a model. `--upstream URL` is one catch-all route; `--config FILE` many.

The config file is TOML:

    [[routes]]
    match = "claude-*"              # a model name, or a pattern (fnmatch: *, ?, [..])
    kind = "anthropic"              # chat_completions | anthropic | responses | demo
    base_url = "https://api.anthropic.com"
    api_key_env = "ANTHROPIC_API_KEY"   # the key is read from this variable, never from the file
    model = "claude-sonnet-4-5"     # optional: the name sent upstream (default: the requested name)
    max_tokens = 8192               # optional: when the request sets no max_output_tokens
    reasoning_history = "reasoning_content"   # chat_completions only
    max_tokens_field = "max_tokens"           # chat_completions only
    context_window = 32768          # optional: tokens; truncation "auto" fits the input before calling

Routes are tried in order; the first match wins.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .errors import APIError, UpstreamError, model_not_found
from .upstreams.base import Route, Upstream

log = logging.getLogger("responses_gateway.routing")

KINDS = ("chat_completions", "anthropic", "responses", "demo")
KEYS = {"match", "kind", "base_url", "api_key_env", "api_key", "model", "max_tokens", "reasoning_history",
        "max_tokens_field", "connect_timeout", "first_byte_timeout", "read_timeout", "idle_timeout",
        "total_timeout", "context_window"}


@dataclass(frozen=True)
class Rule:
    match: str
    route: Route

    @cached_property
    def exact(self) -> bool:
        return not any(c in self.match for c in "*?[")

    def matches(self, model: str) -> bool:
        """Per request: an exact name is one comparison, `*` (the single-upstream route) none at all."""
        if self.match == "*":
            return True
        return model == self.match if self.exact else fnmatch.fnmatchcase(model, self.match)


def load_rules(path: str, environ: Mapping[str, str] | None = None) -> list[Rule]:
    env: Mapping[str, str] = os.environ if environ is None else environ
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    rules = []
    for i, entry in enumerate(data.get("routes") or ()):
        where = f"{path}: routes[{i}]"
        unknown = set(entry) - KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        kind = entry.get("kind", "chat_completions")
        if kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}")
        if "match" not in entry:
            raise ValueError(f"{where}: 'match' is required")
        if kind != "demo" and not str(entry.get("base_url", "")).startswith(("http://", "https://")):
            raise ValueError(f"{where}: base_url must be an http(s) URL")
        key = entry.get("api_key")
        if entry.get("api_key_env"):
            key = env.get(entry["api_key_env"])
            if not key:
                log.warning("%s: environment variable %s is not set", where, entry["api_key_env"])
        fields = {k: entry[k] for k in ("model", "max_tokens", "reasoning_history", "max_tokens_field",
                                        "connect_timeout", "first_byte_timeout", "read_timeout", "total_timeout",
                                        "context_window") if k in entry}
        if "idle_timeout" in entry:  # the documented name of read_timeout
            fields["read_timeout"] = entry["idle_timeout"]
        rules.append(Rule(entry["match"], Route(kind=kind, base_url=entry.get("base_url", ""), api_key=key,
                                                **fields)))
    if not rules:
        raise ValueError(f"{path}: no [[routes]]")
    return rules


def build_upstream(route: Route) -> Upstream:
    if route.kind == "demo":
        from .upstreams.demo import DemoUpstream

        return DemoUpstream()
    if route.kind == "anthropic":
        from .upstreams.anthropic import AnthropicUpstream

        return AnthropicUpstream(route)
    if route.kind == "responses":
        from .upstreams.responses import ResponsesUpstream

        return ResponsesUpstream(route)
    from .upstreams.chat_completions import ChatCompletionsUpstream

    return ChatCompletionsUpstream(route)


class Router:
    """Model name → (upstream, the upstream's name for it). One upstream object (one pool) per route."""

    def __init__(self, rules: list[Rule], upstreams: list[Upstream] | None = None):
        self.rules = rules
        self.upstreams = upstreams or [build_upstream(rule.route) for rule in rules]

    @classmethod
    def single(cls, upstream: Upstream, route: Route) -> Router:
        return cls([Rule("*", route)], [upstream])

    @property
    def labels(self) -> list[str]:
        return [f"{rule.match} -> {up.label}" for rule, up in zip(self.rules, self.upstreams, strict=True)]

    def pick(self, model: str) -> tuple[Upstream, str]:
        rule, upstream = self.rule_for(model)
        return upstream, rule.route.model or model

    def rule_for(self, model: str) -> tuple[Rule, Upstream]:
        """The first rule matching `model` (its `match` names the route in metrics), and its upstream."""
        for rule, upstream in zip(self.rules, self.upstreams, strict=True):
            if rule.matches(model):
                return rule, upstream
        raise APIError(404, model_not_found(model), code="model_not_found")

    async def list_models(self) -> list[dict[str, Any]]:
        """Every routed model: exact names as configured, patterns filtered from their upstream's list."""
        seen: dict[str, dict[str, Any]] = {}
        for rule, upstream in zip(self.rules, self.upstreams, strict=True):
            if rule.exact:
                seen.setdefault(rule.match, {"id": rule.match, "object": "model", "created": 0,
                                             "owned_by": rule.route.kind})
                continue
            try:
                models = await upstream.list_models()
            except UpstreamError as exc:
                if len(self.rules) == 1:
                    raise
                log.warning("listing models of %s failed: %s", upstream.label, exc.message)
                continue
            for m in models:
                if rule.matches(m["id"]):
                    seen.setdefault(m["id"], m)
        return list(seen.values())

    async def close(self) -> None:
        for upstream in self.upstreams:
            await upstream.close()
