"""The `responses-gateway` command."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import fields, replace

from . import __version__
from .config import CHOICES, ENV, Settings, check, from_env

log = logging.getLogger("responses_gateway")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="responses-gateway", description="The OpenAI Responses API for any model.")
    parser.add_argument("--version", action="version", version=f"responses-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--upstream", dest="upstream_url", metavar="URL",
                       help="Chat Completions base URL, e.g. http://127.0.0.1:8000/v1, or 'demo' for the built-in "
                            f"scripted demo model [{ENV['upstream_url']}; default: demo]")
    serve.add_argument("--upstream-api-key", metavar="KEY", help=f"bearer token for the upstream "
                                                                 f"[{ENV['upstream_api_key']}]")
    serve.add_argument("--host", help=f"address to listen on [{ENV['host']}; default 127.0.0.1]")
    serve.add_argument("--port", type=int, help=f"port to listen on [{ENV['port']}; default 8080]")
    serve.add_argument("--workers", type=int, help=f"worker processes [{ENV['workers']}; default 1]")
    serve.add_argument("--hosted-tools", choices=CHOICES["hosted_tools"],
                       help=f"what to do with hosted tools the gateway cannot run [{ENV['hosted_tools']}; "
                            "default drop]")
    serve.add_argument("--reasoning-history", choices=CHOICES["reasoning_history"],
                       help="how earlier reasoning is sent back upstream "
                            f"[{ENV['reasoning_history']}; default reasoning_content]")
    serve.add_argument("--max-tokens-field", choices=CHOICES["max_tokens_field"],
                       help=f"upstream field for max_output_tokens [{ENV['max_tokens_field']}; default max_tokens]")
    serve.add_argument("--max-body-bytes", type=int, help=f"request size limit [{ENV['max_body_bytes']}]")
    serve.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                       help=f"[{ENV['log_level']}; default info]")
    return parser


def settings_from(args: argparse.Namespace, environ=None) -> Settings:
    values = from_env(environ)
    for f in fields(Settings):
        value = getattr(args, f.name, None)
        if value is not None:
            values[f.name] = value
    return check(replace(Settings(), **values))


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = settings_from(args)
    except ValueError as exc:
        sys.exit(f"responses-gateway: {exc}")
    if args.command == "serve":
        serve(settings)


def serve(settings: Settings) -> None:
    import uvicorn

    from .app import create_app, make_upstream

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    upstream = make_upstream(settings)
    log.info("responses-gateway %s listening on http://%s:%d", __version__, settings.host, settings.port)
    log.info("upstream: %s", upstream.label)
    if settings.is_demo:
        log.warning("DEMO MODE: answers come from a scripted demo model, not a real one. "
                    "Use --upstream URL to serve a real model server.")
    common = dict(host=settings.host, port=settings.port, log_level=settings.log_level, access_log=False,
                  timeout_graceful_shutdown=5)
    if settings.workers > 1:
        # Each worker builds its own app from the environment.
        for name, var in ENV.items():
            value = getattr(settings, name)
            if value is not None:
                os.environ[var] = str(value)
        uvicorn.run("responses_gateway.app:app_from_env", factory=True, workers=settings.workers, **common)
    else:
        uvicorn.run(create_app(settings, upstream), **common)
