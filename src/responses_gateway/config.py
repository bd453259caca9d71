"""Settings: command-line flags with RG_* environment fallbacks, resolved once into one immutable object."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from .route import MaxTokensField, ReasoningHistory, Route

DEMO_UPSTREAM = "demo"
MIN_COMPACTION_KEY = 16

# The closed sets of values a setting (or a route of the routing file) takes.
HostedTools = Literal["drop", "reject"]


@dataclass(frozen=True)
class Settings:
    upstream_url: str = DEMO_UPSTREAM
    upstream_api_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    # Upstream deadlines, seconds: connect, first byte (the answer's headers), idle (the longest silence between
    # two reads of the stream), total (the whole call). docs/routing.md has the defaults' reasons.
    upstream_connect_timeout: float = 30.0
    upstream_first_byte_timeout: float | None = 300.0
    upstream_read_timeout: float | None = 600.0
    upstream_total_timeout: float | None = 3600.0
    # Seconds of upstream silence after which an SSE comment keeps proxies and clients from timing out.
    sse_keepalive: float = 15.0
    max_body_bytes: int = 32 * 1024 * 1024
    # Request cost (docs/limits.md): JSON nesting depth, objects + arrays in one body, items in `input`.
    max_json_depth: int = 64
    max_json_containers: int = 200_000
    max_input_items: int = 20_000
    # Edge (docs/limits.md): slow and idle clients, open connections, requests in flight, per-key limits.
    header_timeout: float = 30.0
    body_timeout: float = 60.0
    # A body must keep arriving at this many bytes a second on average once its first `body_rate_grace`
    # seconds are over (0: no minimum); a slower one is answered 408 and its connection closed.
    min_body_rate: float = 500.0
    body_rate_grace: float = 10.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 0  # 0: three quarters of the open-file limit
    max_header_bytes: int = 65536  # the request line and headers of one request
    max_headers: int = 100
    send_timeout: float = 60.0  # seconds a client may read nothing of a response; 0: none
    max_in_flight: int = 512
    key_max_in_flight: int = 0  # 0: off
    key_requests_per_minute: float = 0  # 0: off
    # Hosted tools (web_search, file_search, ...) the gateway cannot run: "drop" them with a warning, or "reject".
    hosted_tools: HostedTools = "drop"
    # How reasoning from earlier turns is sent back to a Chat Completions upstream:
    # "reasoning_content" (vLLM, SGLang, DeepSeek-style templates), "reasoning" (newer vLLM), or "drop".
    reasoning_history: ReasoningHistory = "reasoning_content"
    # Field that carries max_output_tokens upstream: "max_tokens" (every local server) or
    # "max_completion_tokens" (OpenAI's reasoning models reject max_tokens).
    max_tokens_field: MaxTokensField = "max_tokens"
    log_level: str = "info"
    log_format: str = "text"  # "json": one JSON object per line, with the response id (logs.py)
    access_log: bool = False  # one line per request, and per WebSocket connection opened and closed (access.py)
    otel: bool = False  # OpenTelemetry tracing over OTLP (tracing.py); also on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    workers: int = 1
    # State: None = SQLite in the user's data directory; a path or sqlite:///path; postgresql://...; "none".
    db: str | None = None
    retention_days: float = 30.0
    # On SIGTERM: seconds running responses get to finish before they end with response.failed (stored).
    drain_timeout: float = 30.0
    db_timeout: float = 10.0  # seconds for a database connection and for each statement
    health_db_timeout: float = 2.0  # seconds /health gives the database to answer before it reports 503
    # Inbound keys: when any are set, every /v1 request needs `Authorization: Bearer <key>`.
    api_keys: str | None = None  # comma-separated
    api_keys_file: str | None = None
    # HMAC secret for owner ids; None: generated at first start and kept in the store (shared by replicas).
    owner_secret: str | None = None
    config: str | None = None  # a TOML routing file (see routing.py); overrides --upstream
    # MCP: hosts (or host:port, IPs, CIDRs) admitted despite being loopback/private; per-call timeout;
    # a hard cap on model ↔ tool rounds in one response.
    mcp_allow_hosts: str | None = None  # comma-separated
    mcp_timeout: float = 60.0
    max_tool_rounds: int = 16
    # Web search (docs/web-search.md): providers as a fallback chain, "KIND=URL,KIND=URL" (searxng, brave,
    # tavily, exa, mcp); their keys (from flags or the environment, never logged); the deployment's domain
    # policy; per provider: requests per second, seconds a result is cached, seconds per request; pages:
    # seconds and bytes per fetch, and hosts admitted although loopback/private (tests, an intranet).
    web_search: str | None = None
    brave_api_key: str | None = None
    tavily_api_key: str | None = None
    exa_api_key: str | None = None
    web_search_mcp_key: str | None = None
    web_search_allow_domains: str | None = None  # comma-separated
    web_search_deny_domains: str | None = None
    web_search_rate: float = 5.0
    web_search_cache_ttl: float = 600.0
    web_search_timeout: float = 10.0
    web_fetch_timeout: float = 15.0
    web_fetch_max_bytes: int = 8 * 1024 * 1024
    web_fetch_allow_hosts: str | None = None  # comma-separated, as --mcp-allow-hosts
    # Compaction: secrets sealing compaction items, comma-separated; the first seals, all open (rotation).
    # None: a key generated once and kept in the store (docs/compaction.md).
    compaction_key: str | None = None
    # WebSocket mode on GET /v1/responses ("off" answers the upgrade with 426, so clients use HTTP). A
    # connection lives at most this many minutes; the server pings it this often (seconds, 0 = never) and
    # drops it when a pong is that late. A frame may be as large as an HTTP body (max_body_bytes).
    websocket: str = "on"
    websocket_max_minutes: float = 60.0
    websocket_ping_interval: float = 20.0
    # Background responses (docs/background.md). Redis carries the live event log and cancel signals across
    # replicas; without it the database does (polled every `background_poll` seconds).
    redis_url: str | None = None
    redis_cluster: bool = False  # the URL names a node of a Redis Cluster (redisconn.py)
    max_background: int = 64  # concurrent background jobs per process; 429 beyond
    lease_timeout: float = 10.0  # a replica silent this long is presumed dead: its jobs are failed
    background_poll: float = 0.5  # seconds: event-log flush to the database, cancel-flag and follower polls
    event_retention_hours: float = 24.0  # how long the database keeps a background response's event log
    redis_event_ttl: float = 3600.0  # seconds a Redis event stream lives after its last event
    # Code interpreter (docs/code-interpreter.md): "auto" runs it in bubblewrap where the machine allows it
    # (else the tool is refused with a 400 saying why); "bubblewrap" also refuses to start the gateway
    # without it; "off". Limits per call, caps on containers, where their files live on this host, the
    # unprivileged host uid of the code when the gateway runs as root, and the gateway's address as
    # clients reach it (for the URLs of images; default: URLs relative to the gateway).
    code_interpreter: str = "auto"
    code_interpreter_dir: str | None = None
    code_interpreter_uid: int = 65534
    code_interpreter_timeout: float = 120.0
    code_interpreter_max_memory: str = "4g"
    code_interpreter_processes: int = 64
    code_interpreter_output_bytes: int = 64 * 1024
    code_interpreter_disk_bytes: int = 1 << 30
    code_interpreter_file_bytes: int = 32 << 20
    code_interpreter_idle_minutes: int = 20
    code_interpreter_key_containers: int = 100
    code_interpreter_max_live: int = 16
    public_url: str | None = None
    # Files and file_search (docs/file-search.md). Uploads: the largest file, and what one key may keep (0: no
    # quota). Embeddings go to an OpenAI-compatible /v1/embeddings (default: the upstream's) when a model is
    # named; without one, search is keyword-only. Ingestion: files at once per process, bounds on what one
    # file may make (PDF pages, extracted characters), seconds per embeddings request and per search call.
    max_file_bytes: int = 512 * 1024 * 1024
    file_quota_bytes: int = 10 * 1024 * 1024 * 1024
    embeddings_model: str | None = None
    embeddings_url: str | None = None  # None: the upstream's URL
    embeddings_api_key: str | None = None  # None: the upstream's key when the URL is the upstream's
    embeddings_batch: int = 64  # inputs per embeddings request
    embeddings_timeout: float = 60.0
    ingest_workers: int = 2
    max_pdf_pages: int = 2000
    max_extracted_chars: int = 64 * 1024 * 1024
    pdf_timeout: float = 60.0  # seconds one PDF's reader (a child process) may run
    pdf_max_memory_mb: int = 1024  # its address space
    file_search_timeout: float = 30.0

    def mcp_hosts(self) -> list[str]:
        return [h.strip() for h in (self.mcp_allow_hosts or "").split(",") if h.strip()]

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


ENV = {
    "upstream_url": "RG_UPSTREAM_URL",
    "upstream_api_key": "RG_UPSTREAM_API_KEY",
    "host": "RG_HOST",
    "port": "RG_PORT",
    "upstream_connect_timeout": "RG_UPSTREAM_CONNECT_TIMEOUT",
    "upstream_first_byte_timeout": "RG_UPSTREAM_FIRST_BYTE_TIMEOUT",
    "upstream_read_timeout": "RG_UPSTREAM_READ_TIMEOUT",
    "upstream_total_timeout": "RG_UPSTREAM_TOTAL_TIMEOUT",
    "sse_keepalive": "RG_SSE_KEEPALIVE",
    "max_body_bytes": "RG_MAX_BODY_BYTES",
    "max_json_depth": "RG_MAX_JSON_DEPTH",
    "max_json_containers": "RG_MAX_JSON_CONTAINERS",
    "max_input_items": "RG_MAX_INPUT_ITEMS",
    "header_timeout": "RG_HEADER_TIMEOUT",
    "body_timeout": "RG_BODY_TIMEOUT",
    "min_body_rate": "RG_MIN_BODY_RATE",
    "body_rate_grace": "RG_BODY_RATE_GRACE",
    "keep_alive_timeout": "RG_KEEP_ALIVE_TIMEOUT",
    "max_connections": "RG_MAX_CONNECTIONS",
    "max_header_bytes": "RG_MAX_HEADER_BYTES",
    "max_headers": "RG_MAX_HEADERS",
    "send_timeout": "RG_SEND_TIMEOUT",
    "max_in_flight": "RG_MAX_IN_FLIGHT",
    "key_max_in_flight": "RG_KEY_MAX_IN_FLIGHT",
    "key_requests_per_minute": "RG_KEY_REQUESTS_PER_MINUTE",
    "hosted_tools": "RG_HOSTED_TOOLS",
    "reasoning_history": "RG_REASONING_HISTORY",
    "max_tokens_field": "RG_MAX_TOKENS_FIELD",
    "log_level": "RG_LOG_LEVEL",
    "log_format": "RG_LOG_FORMAT",
    "access_log": "RG_ACCESS_LOG",
    "otel": "RG_OTEL",
    "workers": "RG_WORKERS",
    "db": "RG_DB",
    "retention_days": "RG_RETENTION_DAYS",
    "db_timeout": "RG_DB_TIMEOUT",
    "drain_timeout": "RG_DRAIN_TIMEOUT",
    "health_db_timeout": "RG_HEALTH_DB_TIMEOUT",
    "api_keys": "RG_API_KEYS",
    "api_keys_file": "RG_API_KEYS_FILE",
    "owner_secret": "RG_OWNER_SECRET",
    "config": "RG_CONFIG",
    "mcp_allow_hosts": "RG_MCP_ALLOW_HOSTS",
    "mcp_timeout": "RG_MCP_TIMEOUT",
    "max_tool_rounds": "RG_MAX_TOOL_ROUNDS",
    "web_search": "RG_WEB_SEARCH",
    "brave_api_key": "RG_BRAVE_API_KEY",
    "tavily_api_key": "RG_TAVILY_API_KEY",
    "exa_api_key": "RG_EXA_API_KEY",
    "web_search_mcp_key": "RG_WEB_SEARCH_MCP_KEY",
    "web_search_allow_domains": "RG_WEB_SEARCH_ALLOW_DOMAINS",
    "web_search_deny_domains": "RG_WEB_SEARCH_DENY_DOMAINS",
    "web_search_rate": "RG_WEB_SEARCH_RATE",
    "web_search_cache_ttl": "RG_WEB_SEARCH_CACHE_TTL",
    "web_search_timeout": "RG_WEB_SEARCH_TIMEOUT",
    "web_fetch_timeout": "RG_WEB_FETCH_TIMEOUT",
    "web_fetch_max_bytes": "RG_WEB_FETCH_MAX_BYTES",
    "web_fetch_allow_hosts": "RG_WEB_FETCH_ALLOW_HOSTS",
    "compaction_key": "RG_COMPACTION_KEY",
    "websocket": "RG_WEBSOCKET",
    "websocket_max_minutes": "RG_WEBSOCKET_MAX_MINUTES",
    "websocket_ping_interval": "RG_WEBSOCKET_PING_INTERVAL",
    "redis_url": "RG_REDIS_URL",
    "redis_cluster": "RG_REDIS_CLUSTER",
    "max_background": "RG_MAX_BACKGROUND",
    "lease_timeout": "RG_LEASE_TIMEOUT",
    "background_poll": "RG_BACKGROUND_POLL",
    "event_retention_hours": "RG_EVENT_RETENTION_HOURS",
    "redis_event_ttl": "RG_REDIS_EVENT_TTL",
    "code_interpreter": "RG_CODE_INTERPRETER",
    "code_interpreter_dir": "RG_CODE_INTERPRETER_DIR",
    "code_interpreter_uid": "RG_CODE_INTERPRETER_UID",
    "code_interpreter_timeout": "RG_CODE_INTERPRETER_TIMEOUT",
    "code_interpreter_max_memory": "RG_CODE_INTERPRETER_MAX_MEMORY",
    "code_interpreter_processes": "RG_CODE_INTERPRETER_PROCESSES",
    "code_interpreter_output_bytes": "RG_CODE_INTERPRETER_OUTPUT_BYTES",
    "code_interpreter_disk_bytes": "RG_CODE_INTERPRETER_DISK_BYTES",
    "code_interpreter_file_bytes": "RG_CODE_INTERPRETER_FILE_BYTES",
    "code_interpreter_idle_minutes": "RG_CODE_INTERPRETER_IDLE_MINUTES",
    "code_interpreter_key_containers": "RG_CODE_INTERPRETER_KEY_CONTAINERS",
    "code_interpreter_max_live": "RG_CODE_INTERPRETER_MAX_LIVE",
    "public_url": "RG_PUBLIC_URL",
    "max_file_bytes": "RG_MAX_FILE_BYTES",
    "file_quota_bytes": "RG_FILE_QUOTA_BYTES",
    "embeddings_model": "RG_EMBEDDINGS_MODEL",
    "embeddings_url": "RG_EMBEDDINGS_URL",
    "embeddings_api_key": "RG_EMBEDDINGS_API_KEY",
    "embeddings_batch": "RG_EMBEDDINGS_BATCH",
    "embeddings_timeout": "RG_EMBEDDINGS_TIMEOUT",
    "ingest_workers": "RG_INGEST_WORKERS",
    "max_pdf_pages": "RG_MAX_PDF_PAGES",
    "max_extracted_chars": "RG_MAX_EXTRACTED_CHARS",
    "pdf_timeout": "RG_PDF_TIMEOUT",
    "pdf_max_memory_mb": "RG_PDF_MAX_MEMORY_MB",
    "file_search_timeout": "RG_FILE_SEARCH_TIMEOUT",
}

CHOICES: dict[str, tuple[str, ...]] = {
    "hosted_tools": get_args(HostedTools),
    "reasoning_history": get_args(ReasoningHistory),
    "max_tokens_field": get_args(MaxTokensField),
    "websocket": ("on", "off"),
    "log_format": ("text", "json"),
    "code_interpreter": ("auto", "bubblewrap", "off"),
    "code_interpreter_max_memory": ("1g", "4g", "16g", "64g"),
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The RG_* variables that are set, converted to the field types."""
    environ = os.environ if environ is None else environ
    types = {f: Settings.__dataclass_fields__[f].type for f in ENV}
    out: dict[str, Any] = {}
    for name, var in ENV.items():
        raw = environ.get(var)
        if raw is None or raw == "":
            continue
        kind = types[name]
        if kind == "bool":
            out[name] = raw.strip().lower() in ("1", "true", "yes", "on")
        elif kind == "int":
            out[name] = int(raw)
        elif kind in ("float", "float | None") or name in ("retention_days", "mcp_timeout"):
            out[name] = float(raw)
        else:
            out[name] = raw
    return out


def check(settings: Settings) -> Settings:
    for name, allowed in CHOICES.items():
        value = getattr(settings, name)
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    if any(len(key) < MIN_COMPACTION_KEY for key in settings.compaction_keys()):
        raise ValueError(f"a compaction key must be at least {MIN_COMPACTION_KEY} characters, e.g. "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    for name in ("lease_timeout", "background_poll", "drain_timeout", "max_file_bytes", "embeddings_batch",
                 "embeddings_timeout", "ingest_workers", "max_pdf_pages", "max_extracted_chars", "pdf_timeout",
                 "pdf_max_memory_mb", "file_search_timeout",
                 "max_header_bytes", "max_headers"):
        if getattr(settings, name) <= 0:
            raise ValueError(f"{name} must be positive; got {getattr(settings, name)!r}")
    for name in ("code_interpreter_timeout", "code_interpreter_processes", "code_interpreter_output_bytes",
                 "code_interpreter_disk_bytes", "code_interpreter_file_bytes", "code_interpreter_idle_minutes",
                 "code_interpreter_key_containers", "code_interpreter_max_live"):
        if getattr(settings, name) <= 0:
            raise ValueError(f"{name} must be positive; got {getattr(settings, name)!r}")
    if settings.send_timeout < 0:
        raise ValueError(f"send_timeout must be 0 (none) or positive; got {settings.send_timeout!r}")
    if settings.redis_cluster and not settings.redis_url:
        raise ValueError("redis_cluster needs a Redis URL (--redis): the address of any node of the cluster")
    if settings.public_url and not settings.public_url.startswith(("http://", "https://")):
        raise ValueError(f"public_url must be an http(s) URL; got {settings.public_url!r}")
    if settings.embeddings_url and not settings.embeddings_url.startswith(("http://", "https://")):
        raise ValueError(f"embeddings-url must be an http(s) URL; got {settings.embeddings_url!r}")
    if settings.redis_url and not settings.redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"redis must be a redis://, rediss:// or unix:// URL; got {settings.redis_url!r}")
    if settings.web_search:
        from .tools.web_search.config import parse_spec

        parse_spec(settings.web_search)  # a wrong provider stops the gateway at startup, naming it
    for name in ("web_search_timeout", "web_fetch_timeout", "web_fetch_max_bytes"):
        if getattr(settings, name) <= 0:
            raise ValueError(f"{name} must be positive; got {getattr(settings, name)!r}")
    if not settings.is_demo and not settings.upstream_url.startswith(("http://", "https://")):
        raise ValueError(f"upstream must be an http(s) URL or 'demo'; got {settings.upstream_url!r}")
    return settings
