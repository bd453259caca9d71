"""The gateway's own settings, each declared once (settings.py derives its flag, variable, `--help` group and
README row), resolved once into one immutable object.

The gateway-run tools declare their settings in their own packages (`tools/<tool>/settings.py`); a
`Settings` carries them as `groups`, read typed with `settings.group(WebSearchSettings)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

from . import settings as declare
from .route import MaxTokensField, ReasoningHistory, Route
from .settings import setting

DEMO_UPSTREAM = "demo"
MIN_COMPACTION_KEY = 16

# The closed sets of values a setting (or a route of the routing file) takes.
HostedTools = Literal["drop", "reject"]

G = TypeVar("G")

UPSTREAM = "Upstream"
SERVER = "Server"
LIMITS = "Limits"
STATE = "State"
KEYS = "Keys"
BACKGROUND = "Background responses and Redis"
LOGS = "Logs and traces"
TOOLS = "Tools"
CONSOLE = "Console"
DB = ("serve", "db")  # settings `responses-gateway db` takes too


@dataclass(frozen=True)
class Settings:
    """The gateway"""

    # -- upstream ----------------------------------------------------------------------------------------
    upstream_url: str = setting(
        DEMO_UPSTREAM, flag="--upstream", env="RG_UPSTREAM_URL", metavar="URL", group=UPSTREAM,
        help="Chat Completions base URL, e.g. http://127.0.0.1:8000/v1 (several, comma-separated: replicas of one "
             "model, a pool), or 'demo' for the built-in scripted demo model",
        doc="Chat Completions base URL (several, comma-separated: a pool of replicas, "
            "[docs/routing.md](docs/routing.md#pools)), or `demo`")
    affinity_max_load: float = setting(
        1.5, check="positive", group=UPSTREAM,
        help="a pool keeps a session on its replica while that replica's load is at most this times the mean",
        doc="a pool keeps a session on the replica of its last turn while that replica's load (requests in flight "
            "per unit of weight) is at most this times the pool's mean ([docs/routing.md](docs/routing.md#pools))")
    config: str | None = setting(
        None, metavar="FILE", group=UPSTREAM, help="TOML file routing model names to upstreams (docs/routing.md)",
        doc="TOML routing of model names to several upstreams (Chat Completions, Anthropic Messages, Responses), "
            "and the tools' tables: [docs/routing.md](docs/routing.md)")
    upstream_api_key: str | None = setting(None, metavar="KEY", secret=True, group=UPSTREAM,
                                           help="bearer token sent upstream")
    reasoning_history: ReasoningHistory = setting(
        "reasoning_content", choices=get_args(ReasoningHistory), group=UPSTREAM,
        help="how earlier reasoning is sent back upstream: reasoning_content (vLLM, SGLang, DeepSeek-style "
             "templates), reasoning (newer vLLM) or drop")
    max_tokens_field: MaxTokensField = setting(
        "max_tokens", choices=get_args(MaxTokensField), group=UPSTREAM,
        help="upstream field for max_output_tokens (OpenAI's reasoning models need max_completion_tokens)",
        doc="upstream field for `max_output_tokens` (OpenAI's reasoning models need `max_completion_tokens`)")
    # Upstream deadlines: connect, first byte (the answer's headers), idle (the longest silence between two
    # reads of the stream), total (the whole call). docs/routing.md has the defaults' reasons.
    upstream_connect_timeout: float = setting(30.0, check="positive", group=UPSTREAM,
                                              help="seconds to connect to the upstream")
    upstream_first_byte_timeout: float | None = setting(300.0, group=UPSTREAM,
                                                        help="seconds for the upstream's answer to begin")
    upstream_read_timeout: float | None = setting(
        600.0, flag="--upstream-idle-timeout", group=UPSTREAM, help="seconds of upstream silence mid-stream",
        doc="seconds of upstream silence mid-stream; each deadline is reported with its own error code "
            "([docs/routing.md](docs/routing.md))")
    upstream_total_timeout: float | None = setting(3600.0, group=UPSTREAM, help="seconds for a whole upstream call")

    # -- server ------------------------------------------------------------------------------------------
    host: str = setting("127.0.0.1", metavar="ADDR", group=SERVER, help="address to listen on")
    port: int = setting(8080, group=SERVER, help="port to listen on")
    workers: int = setting(1, check="positive", group=SERVER,
                           help="worker processes (/metrics sums all workers' counters)")
    drain_timeout: float = setting(
        30.0, check="positive", group=SERVER, help="on SIGTERM, seconds running responses get to finish",
        doc="on SIGTERM the gateway stops accepting and gives running responses this long; the rest end with a "
            "stored `response.failed` (`server_shutting_down`)")
    sse_keepalive: float = setting(
        15.0, check="non_negative", metavar="S", group=SERVER, help="an SSE comment after this many seconds of silence",
        doc="an SSE comment (`: keep-alive`) after this much upstream silence; also how long a stream waits for a "
            "slow upstream's first answer before it starts anyway ([docs/faults.md](docs/faults.md)); 0 turns "
            "both off")
    websocket: str = setting(
        "on", choices=("on", "off"), group=SERVER,
        help="WebSocket mode on GET /v1/responses; off answers 426 so clients use HTTP",
        doc="WebSocket mode on `GET /v1/responses` ([docs/websocket.md](docs/websocket.md)); `off` answers 426 "
            "so clients use HTTP")
    websocket_max_minutes: float = setting(
        60.0, check="positive", metavar="MINUTES", group=SERVER, help="lifetime of one WebSocket connection in minutes",
        doc="lifetime of one WebSocket connection (it then ends with `websocket_connection_limit_reached`)")
    websocket_ping_interval: float = setting(
        20.0, check="non_negative", group=SERVER,
        help="seconds between the server's keepalive pings (0: none); a pong later than that closes the "
             "connection")
    public_url: str | None = setting(
        None, metavar="URL", group=SERVER,
        help="the gateway's address as clients reach it, for URLs it hands out (code interpreter images); "
             "default: URLs relative to the gateway")

    # -- limits ------------------------------------------------------------------------------------------
    max_body_bytes: int = setting(32 * 1024 * 1024, check="positive", shown="32 MiB", group=LIMITS,
                                  help="request size limit (413 above it)")
    max_json_depth: int = setting(64, check="positive", group=LIMITS,
                                  help="deepest nesting of objects/arrays in a body (400 above it)")
    max_json_containers: int = setting(200_000, check="positive", group=LIMITS,
                                       help="objects + arrays in one body (400 above it)")
    max_input_items: int = setting(
        20_000, check="positive", group=LIMITS, help="items in one request's input (400 above it)",
        doc="items in one request's `input` (400 above it), whatever carries it: `/v1/responses`, a WebSocket "
            "turn, compact, input_tokens")
    header_timeout: float = setting(
        30.0, check="positive", group=LIMITS, help="seconds a client has to send a request's headers",
        doc="a client slower than this sending a request's headers is disconnected "
            "([docs/limits.md](docs/limits.md))")
    body_timeout: float = setting(60.0, check="positive", group=LIMITS,
                                  help="seconds a client has to send a request's body")
    # A body must keep arriving at this many bytes a second on average once its first `body_rate_grace`
    # seconds are over (0: no minimum); a slower one is answered 408 and its connection closed.
    min_body_rate: float = setting(
        500.0, check="non_negative", group=LIMITS,
        help="bytes a second a request's body must average after its grace (0: no minimum)",
        doc="a body that, after its first `--body-rate-grace` seconds, has averaged fewer than this many bytes a "
            "second is answered 408 and its connection closed (`0`: no minimum) ([docs/limits.md](docs/limits.md))")
    body_rate_grace: float = setting(10.0, check="non_negative", group=LIMITS,
                                     help="seconds a request's body may take before --min-body-rate applies")
    body_idle_timeout: float = setting(
        15.0, check="non_negative", group=LIMITS,
        help="seconds a request body (or WebSocket message) may go without a byte before it is cut (0: none)",
        doc="a body, or a WebSocket message, of which nothing has come for this long is cut: 408 and the "
            "connection closed (a WebSocket: closed 1008); `0`: none ([docs/limits.md](docs/limits.md#bodies-in-flight))")
    max_bodies_bytes: int = setting(
        512 * 1024 * 1024, check="non_negative", shown="512 MiB", group=LIMITS,
        help="bytes of request bodies and WebSocket messages still arriving, per process (503 beyond; 0: no limit)",
        doc="bytes held by request bodies and WebSocket messages still arriving, all of them together, per process: "
            "one that would pass it is answered `503` with `Retry-After` (a WebSocket is closed 1013); `0`: no "
            "limit ([docs/limits.md](docs/limits.md#bodies-in-flight))")
    keep_alive_timeout: float = setting(5.0, check="positive", group=LIMITS,
                                        help="seconds an idle keep-alive connection is kept")
    max_connections: int = setting(0, check="non_negative", shown="3/4 of ulimit -n", group=LIMITS,
                                   help="open client connections per process; more are closed at once")
    max_header_bytes: int = setting(
        65536, check="positive", group=LIMITS, help="bytes of a request's line and headers (431 beyond)",
        doc="a request's line and headers together: beyond it `431` and the connection is closed (a request "
            "target over 8 KiB: `414`) ([docs/limits.md](docs/limits.md#request-heads))")
    max_headers: int = setting(100, check="positive", group=LIMITS, help="headers in one request (431 beyond)")
    send_timeout: float = setting(
        60.0, check="non_negative", group=LIMITS,
        help="seconds a client may read nothing of a response before it is ended (stored as failed) and the "
             "connection dropped; 0: none",
        doc="a client that reads nothing of a response for this long (its buffer full): the response ends as "
            "failed and is stored, the upstream request is closed, the connection dropped; `0`: none "
            "([docs/limits.md](docs/limits.md#clients-that-stop-reading))")
    max_in_flight: int = setting(
        512, check="positive", group=LIMITS, help="requests in flight per process (429 beyond)",
        doc="requests in flight per process (admitted once their body has arrived; a stream until its end, a "
            "background response until its job ends); more get OpenAI's 429 — over HTTP and WebSocket alike "
            "([docs/limits.md](docs/limits.md))")
    key_max_in_flight: int = setting(
        0, check="non_negative", shown="0 (off)", group=LIMITS,
        help="concurrent requests per API key (429 beyond); per process, or across all with --redis")
    key_requests_per_minute: float = setting(
        0, check="non_negative", shown="0 (off)", group=LIMITS,
        help="requests a minute per API key (429 beyond); per process, or across all with --redis")

    # -- tools -------------------------------------------------------------------------------------------
    hosted_tools: HostedTools = setting(
        "drop", choices=get_args(HostedTools), group=TOOLS,
        help="hosted tools this deployment cannot run: drop them from the request (with a warning), or reject "
             "the request with a 400",
        doc="hosted tools (web_search, …) this deployment cannot run: left out of the request (a warning once per "
            "tool type saying how to enable it, and `responses_gateway_hosted_tools_dropped_total{type}`), or "
            "refused with a 400 naming the tool. Drop is the default because the Codex CLI sends "
            "`{\"type\": \"web_search\"}` on every request")
    max_tool_rounds: int = setting(16, check="positive", group=TOOLS,
                                   help="cap on model ↔ gateway-run tool rounds in one response")

    # -- logs and traces ---------------------------------------------------------------------------------
    log_level: str = setting("info", choices=("debug", "info", "warning", "error"), commands=DB, group=LOGS,
                             help="the least severe lines logged")
    log_format: str = setting(
        "text", choices=("text", "json"), group=LOGS, help="json: one object per line with the response id",
        doc="every line, uvicorn's too, in one format: `text`, `time LEVEL logger: message`; `json`, one object "
            "per line (`time`, `level`, `logger`, `message`, and `response_id` on lines logged while a response "
            "is served)")
    access_log: bool = setting(
        False, group=LOGS,
        help="one line per request (status, bytes, time, response id), and per WebSocket connection opened and "
             "closed",
        doc="one line per request (client, method and path, status, bytes, time, response id or `-`), and one "
            "when a WebSocket connection opens and one when it closes; in the `--log-format` of every other line "
            "([docs/observability.md](docs/observability.md#access-log))")
    metrics_key: str | None = setting(
        None, metavar="KEY", secret=True, group=LOGS, help="bearer key /metrics asks for",
        doc="`/metrics` answers only `Authorization: Bearer <key>` (on the public port, or on `--metrics-port`); "
            "without it and without `--metrics-port`, `/metrics` is off the public port where API keys are set "
            "([docs/observability.md](docs/observability.md#metrics))")
    metrics_port: int = setting(
        0, check="non_negative", shown="0 (on the public port)", group=LOGS,
        help="serve /metrics on this port of --metrics-host instead of the public one",
        doc="`/metrics` on a listener of its own (`--metrics-host`, default 127.0.0.1) and not on the public port; "
            "with `--workers`, the supervisor serves it, summing every worker")
    metrics_host: str = setting("127.0.0.1", metavar="ADDR", group=LOGS,
                                help="address of the --metrics-port listener")
    otel: bool = setting(
        False, group=LOGS, shown="off (on when OTEL_EXPORTER_OTLP_ENDPOINT is set)",
        help="OpenTelemetry traces over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT",
        doc="OpenTelemetry traces over OTLP/HTTP to the standard `OTEL_EXPORTER_OTLP_*` endpoint (needs "
            "`pip install 'responses-gateway[otel]'`): a `response` span per response with `upstream`, `store`, "
            "`mcp.list_tools` and `mcp.call` child spans; each worker exports its own")

    # -- state -------------------------------------------------------------------------------------------
    db: str | None = setting(
        None, metavar="URL", commands=DB, group=STATE, shown="SQLite in the user's data directory",
        help="where responses are stored: a SQLite path or sqlite:///path, postgresql://user@host/db, or 'none'",
        doc="where responses are stored: a SQLite path (or `sqlite:///path`), `postgresql://user@host/db`, or "
            "`none`; the default is a SQLite file in `$XDG_DATA_HOME/responses-gateway/`")
    retention_days: float = setting(
        30.0, check="positive", commands=DB, group=STATE, help="how long stored responses are kept, in days",
        doc="stored responses older than this are purged (at startup and hourly, in short batches: [State](#state))")
    event_retention_hours: float = setting(
        24.0, check="positive", commands=DB, group=STATE,
        help="how long background event logs stay in the database (resume after the end)")
    db_timeout: float = setting(
        10.0, check="positive", commands=DB, group=STATE,
        help="seconds for a database connection and each statement (a purge's batch)",
        doc="deadline for a database connection and each statement (PostgreSQL), and for a write's wait for the "
            "write lock (SQLite): a stalled database fails requests with `503 store_unavailable` (a stream: "
            "`response.failed`, `storage_error`) instead of holding them")
    health_db_timeout: float = setting(
        2.0, check="positive", group=STATE, help="seconds /health waits for the database",
        doc="`GET /health` is 503 (`{\"status\":\"unavailable\",\"database\":\"…\"}`) when the database does not "
            "answer a trivial query within this")
    compaction_key: str | None = setting(
        None, metavar="K1,K2", secret=True, group=STATE, shown="generated once, kept in the store",
        help="secrets sealing compaction items; the first seals, all open (rotation)",
        doc="secrets sealing compaction items; the first seals, all open (rotation): "
            "[docs/compaction.md](docs/compaction.md)")

    # -- keys --------------------------------------------------------------------------------------------
    api_keys: str | None = setting(
        None, metavar="K1,K2", secret=True, group=KEYS, help="accepted API keys",
        doc="when set (or `--api-keys-file`), every `/v1` request needs `Authorization: Bearer <key>`; each key "
            "sees only its own stored responses")
    api_keys_file: str | None = setting(None, metavar="PATH", group=KEYS,
                                        help="file with one accepted API key per line")
    owner_secret: str | None = setting(
        None, metavar="SECRET", secret=True, group=KEYS, shown="generated at first start, kept in the database",
        help="HMAC secret for the owner ids derived from API keys",
        doc="HMAC-SHA256 secret for the owner id stored with each row (never the key itself); the generated one is "
            "shared by every replica on the same database. At startup, rows stored under the old unsalted hash "
            "of a configured key are moved to its keyed owner, so an upgrade loses nothing")

    # -- background responses and Redis ------------------------------------------------------------------
    redis_url: str | None = setting(
        None, flag="--redis", metavar="URL", group=BACKGROUND,
        help="Redis for the live event logs and cancel signals of background responses, and the per-key "
             "limits, across workers and replicas, e.g. redis://127.0.0.1:6379/0",
        doc="Redis for background responses across replicas: live event logs (Streams) and cancel signals "
            "([docs/background.md](docs/background.md)); and the per-key limits, then shared by all workers "
            "and replicas ([docs/limits.md](docs/limits.md))")
    redis_cluster: bool = setting(
        False, group=BACKGROUND, help="the --redis URL names a node of a Redis Cluster: use the cluster client",
        doc="the `--redis` URL names a node of a Redis Cluster: the cluster client is used (the per-key limits' "
            "keys carry a hash tag) ([docs/limits.md](docs/limits.md#redis-cluster))")
    max_background: int = setting(64, check="positive", group=BACKGROUND,
                                  help="concurrent background responses per process (429 beyond)")
    lease_timeout: float = setting(
        10.0, check="positive", group=BACKGROUND,
        help="seconds without a lease renewal after which a replica's background responses (and leased jobs) "
             "are failed or taken over by another")
    background_poll: float = setting(
        0.5, check="positive", group=BACKGROUND,
        help="seconds between event-log flushes, cancel-flag and database-follower polls")
    redis_event_ttl: float = setting(3600.0, check="positive", group=BACKGROUND,
                                     help="seconds a Redis event stream lives after its last event")

    # -- the web console (console/, docs/console.md) -----------------------------------------------------
    console: bool = setting(
        False, group=CONSOLE, help="serve the web console at /console (needs RG_CONSOLE_KEY and a store)",
        doc="serve the web console at `/console`: stored responses, conversations, files, vector stores, "
            "containers, usage, and the responses in flight ([docs/console.md](docs/console.md)); needs "
            "`RG_CONSOLE_KEY` and a store")
    console_key: str | None = setting(
        None, metavar="KEY", secret=True, commands=(), group=CONSOLE,
        help="the console's own admin key (environment only: RG_CONSOLE_KEY), never an API key",
        doc="the console's own admin key, at least 16 characters; **environment only** (`RG_CONSOLE_KEY`, no "
            "flag, so it never shows in `ps`); never one of the API keys")

    # -- the gateway-run tools' own settings, one object per tool (tools/<tool>/settings.py) -------------
    groups: tuple[Any, ...] = field(default=(), compare=False)

    def group(self, kind: type[G]) -> G:
        """A tool's settings group (its defaults when none was given)."""
        for one in self.groups:
            if type(one) is kind:
                return one
        return kind()

    def load_api_keys(self) -> list[str]:
        keys = [k.strip() for k in (self.api_keys or "").split(",") if k.strip()]
        if self.api_keys_file:
            with open(self.api_keys_file, encoding="utf-8") as fh:
                keys += [line.strip() for line in fh if line.strip() and not line.lstrip().startswith("#")]
        return keys

    def compaction_keys(self) -> list[str]:
        return [k.strip() for k in (self.compaction_key or "").split(",") if k.strip()]

    def server_options(self) -> dict[str, Any]:
        """uvicorn's settings that follow from ours: the WebSocket keepalive and the largest frame it reads.

        Frames up to 64 KiB over the limit still reach the gateway, which answers them with a clear
        `request_too_large` error frame; anything larger is refused by the server itself (close code 1009)."""
        ping = self.websocket_ping_interval or None
        return dict(ws_max_size=self.max_body_bytes + 64 * 1024, ws_ping_interval=ping, ws_ping_timeout=ping)

    @property
    def is_demo(self) -> bool:
        return self.upstream_url == DEMO_UPSTREAM

    def route(self) -> Route:
        """The one upstream given by --upstream, as a Route."""
        return Route(
            kind="demo" if self.is_demo else "chat_completions",
            base_url="" if self.is_demo else self.upstream_url,
            api_key=self.upstream_api_key,
            reasoning_history=self.reasoning_history,
            max_tokens_field=self.max_tokens_field,
            connect_timeout=self.upstream_connect_timeout,
            first_byte_timeout=self.upstream_first_byte_timeout,
            read_timeout=self.upstream_read_timeout,
            total_timeout=self.upstream_total_timeout,
        )


def check(settings: Settings) -> Settings:
    """The core settings' declared checks and the rules that tie several together; ValueError naming the flag.
    Each tool's group is checked by its own `check` (tools/kits.py)."""
    declare.check(settings)
    if any(len(key) < MIN_COMPACTION_KEY for key in settings.compaction_keys()):
        raise ValueError(f"a compaction key must be at least {MIN_COMPACTION_KEY} characters, e.g. "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    if settings.console and len(settings.console_key or "") < MIN_COMPACTION_KEY:
        raise ValueError(f"--console needs its admin key in RG_CONSOLE_KEY (at least {MIN_COMPACTION_KEY} "
                         "characters, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    if settings.console and settings.db == "none":
        raise ValueError("--console shows what the store keeps: it needs a database (not --db none)")
    if settings.console and settings.console_key in [k.strip() for k in (settings.api_keys or "").split(",")]:
        raise ValueError("RG_CONSOLE_KEY must not be one of the API keys: the console has its own key (not one of the API keys)")
    if settings.redis_cluster and not settings.redis_url:
        raise ValueError("--redis-cluster needs a Redis URL (--redis): the address of any node of the cluster")
    if settings.public_url and not settings.public_url.startswith(("http://", "https://")):
        raise ValueError(f"--public-url must be an http(s) URL; got {settings.public_url!r}")
    if settings.redis_url and not settings.redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"--redis must be a redis://, rediss:// or unix:// URL; got {settings.redis_url!r}")
    if not settings.is_demo and not all(u.strip().startswith(("http://", "https://"))
                                        for u in settings.upstream_url.split(",")):
        raise ValueError(f"--upstream must be an http(s) URL or 'demo'; got {settings.upstream_url!r}")
    return settings
