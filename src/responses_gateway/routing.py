"""Routing: which upstream serves a model. `--upstream URL` is one catch-all route; `--config FILE` many.

The config file is TOML:

    [[routes]]
    match = "claude-*"              # a model name, or a pattern (fnmatch: *, ?, [..])
    kind = "anthropic"              # chat_completions | anthropic | responses | demo
    base_url = "https://api.anthropic.com"
    api_key_env = "ANTHROPIC_API_KEY"   # the key is read from this variable, never from the file
    model = "claude-sonnet-4-5"     # optional: the name sent upstream (default: the requested name)
    max_tokens = 8192               # optional: when the request sets no max_output_tokens
    reasoning_history = "reasoning_content"   # reasoning_content | reasoning | drop (chat_completions, responses)
    max_tokens_field = "max_tokens"           # max_tokens | max_completion_tokens (chat_completions only)
    context_window = 32768                    # optional: tokens; truncation "auto" fits the input before calling
    computer_profile = "qwen2.5-vl"           # optional: how its computer-use actions are offered and read
                                              # (docs/computer-use.md), with computer_coordinates,
                                              # computer_max_pixels, computer_min_pixels, computer_function
    idle_timeout = 600                        # optional deadlines in seconds, with connect_timeout,
                                              # first_byte_timeout, total_timeout (docs/routing.md)

A route may be a pool of replicas of one model server (docs/routing.md, "Pools"; upstreams/pool.py):
`base_url` a list of URLs, or `[[routes.replicas]]` tables with `base_url`, `weight` and `api_key_env`;
`balance` (affinity | least_loaded | round_robin), `affinity_max_load` and `probe_interval` (seconds) tune it.

The same file may hold a `[web_search]` table: the web search providers and their settings, in place of
`--web-search` (tools/web_search/config.py, docs/web-search.md).

Routes are tried in order; the first match wins. Every entry is checked when the file is loaded: an unknown
key, a value outside its closed set or of the wrong type stops the gateway at startup, naming the key.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, get_args

from .errors import APIError, UpstreamError, model_not_found
from .route import (
    COMPUTER_PROFILES,
    ComputerCoordinates,
    ComputerFunction,
    MaxTokensField,
    ReasoningHistory,
    Route,
    RouteKind,
)
from .upstreams.base import Upstream
from .upstreams.pool import BALANCES, Balance, Pool, Replica
from .upstreams.registry import build_upstream

log = logging.getLogger("responses_gateway.routing")

CHOICES: dict[str, tuple[str, ...]] = {
    "kind": get_args(RouteKind),
    "reasoning_history": get_args(ReasoningHistory),
    "max_tokens_field": get_args(MaxTokensField),
    "computer_profile": COMPUTER_PROFILES,
    "computer_coordinates": get_args(ComputerCoordinates),
    "computer_function": get_args(ComputerFunction),
    "balance": BALANCES,
}
STRINGS = ("match", "api_key_env", "api_key", "model")
SECONDS = ("connect_timeout", "first_byte_timeout", "read_timeout", "idle_timeout", "total_timeout")
NUMBERS = {"max_tokens": "an integer", "context_window": "an integer", "computer_max_pixels": "an integer",
           "computer_min_pixels": "an integer", "affinity_max_load": "a number", "probe_interval": "a number of seconds",
           **{key: "a number of seconds" for key in SECONDS}}
FRACTIONAL = (*SECONDS, "affinity_max_load", "probe_interval")
KEYS = {*CHOICES, *STRINGS, *NUMBERS, "base_url", "replicas"}
REPLICA_KEYS = {"base_url", "weight", "api_key_env", "api_key"}


@dataclass(frozen=True)
class Rule:
    match: str
    route: Route
    replicas: tuple[Replica, ...] = ()  # more than one: the route is a pool (upstreams/pool.py)
    balance: Balance = "affinity"
    max_load: float | None = None  # None: --affinity-max-load
    probe_interval: float | None = None

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
    rules: list[Rule] = []
    for i, entry in enumerate(data.get("routes") or ()):
        where = f"{path}: routes[{i}]"
        _check(entry, where)
        kind = entry.get("kind", "chat_completions")
        if "match" not in entry:
            raise ValueError(f"{where}: 'match' is required")
        key = _key(entry, where, env)
        replicas = _replicas(entry, where, env, key) if kind != "demo" else []
        if kind != "demo" and not replicas:
            raise ValueError(f"{where}: base_url must be an http(s) URL")
        fields = {k: entry[k] for k in ("model", "max_tokens", "reasoning_history", "max_tokens_field",
                                        "connect_timeout", "first_byte_timeout", "read_timeout", "total_timeout",
                                        "context_window", "computer_profile", "computer_coordinates",
                                        "computer_max_pixels", "computer_min_pixels", "computer_function")
                  if k in entry}
        if "idle_timeout" in entry:  # the documented name of read_timeout
            fields["read_timeout"] = entry["idle_timeout"]
        first = replicas[0] if replicas else Replica("", key)
        rules.append(Rule(entry["match"], Route(kind=kind, base_url=first.base_url, api_key=first.api_key, **fields),
                          tuple(replicas) if len(replicas) > 1 else (), entry.get("balance", "affinity"),
                          entry.get("affinity_max_load"), entry.get("probe_interval")))
    if not rules:
        raise ValueError(f"{path}: no [[routes]]")
    return rules


def _key(entry: dict[str, Any], where: str, env: Mapping[str, str]) -> str | None:
    """The API key of an entry (a route, or one of its replicas): `api_key_env`'s variable, else `api_key`."""
    key = entry.get("api_key")
    if entry.get("api_key_env"):
        key = env.get(entry["api_key_env"])
        if not key:
            log.warning("%s: environment variable %s is not set", where, entry["api_key_env"])
    return key


def _replicas(entry: dict[str, Any], where: str, env: Mapping[str, str], key: str | None) -> list[Replica]:
    """The route's replicas: `[[routes.replicas]]`, a list of `base_url`s, or its one `base_url`. An empty
    list, a replica given twice, a weight that is not positive: ValueError naming the route and the key."""
    if "replicas" in entry:
        if "base_url" in entry:
            raise ValueError(f"{where}: give either base_url or [[routes.replicas]], not both")
        tables = entry["replicas"]
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise ValueError(f"{where}: replicas must be [[routes.replicas]] tables")
        if not tables:
            raise ValueError(f"{where}: replicas is empty")
        out = []
        for j, table in enumerate(tables):
            here = f"{where}.replicas[{j}]"
            unknown = set(table) - REPLICA_KEYS
            if unknown:
                raise ValueError(f"{here}: unknown keys {sorted(unknown)}")
            weight = table.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                raise ValueError(f"{here}: weight must be a positive number; got {weight!r}")
            url = _url(table.get("base_url"), f"{here}: base_url")
            own = _key(table, here, env) if ("api_key" in table or "api_key_env" in table) else key
            out.append(Replica(url, own, float(weight)))
    else:
        given = entry.get("base_url", "")
        if isinstance(given, list):
            if not given:
                raise ValueError(f"{where}: base_url is an empty list")
            out = [Replica(_url(url, f"{where}: base_url[{j}]"), key) for j, url in enumerate(given)]
        elif isinstance(given, str) and given.startswith(("http://", "https://")):
            out = [Replica(given, key)]
        elif isinstance(given, str):
            return []
        else:
            raise ValueError(f"{where}: base_url must be a string or a list of strings; got {given!r}")
    seen: set[str] = set()
    for replica in out:
        if replica.base_url.rstrip("/") in seen:
            raise ValueError(f"{where}: replica {replica.base_url} is listed twice")
        seen.add(replica.base_url.rstrip("/"))
    return out


def _url(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(f"{what} must be an http(s) URL; got {value!r}")
    return value


def pool_rule(urls: str, route: Route) -> Rule:
    """`--upstream a,b,...`: one catch-all route over those replicas (each with --upstream-api-key)."""
    replicas = _replicas({"base_url": [u.strip() for u in urls.split(",")]}, "--upstream", {}, route.api_key)
    return Rule("*", replace(route, base_url=replicas[0].base_url), tuple(replicas) if len(replicas) > 1 else ())


def _check(entry: dict[str, Any], where: str) -> None:
    """One `[[routes]]` entry: known keys only, each with a value of its type (and in its closed set)."""
    unknown = set(entry) - KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    for key, allowed in CHOICES.items():
        if key in entry and entry[key] not in allowed:
            raise ValueError(f"{where}: {key} must be one of {', '.join(allowed)}; got {entry[key]!r}")
    for key in STRINGS:
        if key in entry and not isinstance(entry[key], str):
            raise ValueError(f"{where}: {key} must be a string; got {entry[key]!r}")
    for key, what in NUMBERS.items():
        if key not in entry:
            continue
        value = entry[key]
        whole = isinstance(value, int) and not isinstance(value, bool)
        if not (whole or (isinstance(value, float) and key in FRACTIONAL)):
            raise ValueError(f"{where}: {key} must be {what}; got {value!r}")
        if value <= 0:
            raise ValueError(f"{where}: {key} must be a positive {what.split(' ', 1)[1]}; got {value!r}")


class Router:
    """Model name → (upstream, the upstream's name for it). One upstream object per route: an adapter, or a
    `Pool` of them (one per replica)."""

    def __init__(self, rules: list[Rule], upstreams: list[Upstream] | None = None, max_load: float = 1.5):
        self.rules = rules
        self.upstreams = upstreams or [build(rule, max_load) for rule in rules]

    def pools(self) -> list[Pool]:
        return [up for up in self.upstreams if isinstance(up, Pool)]

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


def build(rule: Rule, max_load: float) -> Upstream:
    """A rule's upstream: its adapter, or a pool of one adapter per replica."""
    if len(rule.replicas) < 2:
        return build_upstream(rule.route)
    return Pool(rule.route, list(rule.replicas), build_upstream, name=rule.match, balance=rule.balance,
                max_load=rule.max_load or max_load, probe_interval=rule.probe_interval)
