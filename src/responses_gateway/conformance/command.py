"""`responses-gateway check URL`: run the scenarios against a Responses endpoint and report every violation.

Exit status: 0 when nothing failed (skipped scenarios do not fail), 1 on any violation, 2 when the check
could not run at all (bad arguments, no spec file, unreadable --sse-file).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from .report import html_report, json_report, passed, text_report
from .rules import inspect_stream
from .scenarios import SCENARIOS, Exchange, ScenarioResult, Validator
from .scenarios import run as run_scenarios


def add_arguments(check: argparse.ArgumentParser) -> None:
    check.add_argument("url", nargs="?", metavar="URL",
                       help="base URL of the Responses API, as given to the openai SDK (e.g. http://127.0.0.1:8080/v1;"
                            " /v1 is added to a bare host)")
    check.add_argument("--model", default=os.environ.get("RG_CHECK_MODEL"),
                       help="model name sent in every request [RG_CHECK_MODEL]")
    check.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                       help="bearer token for the server [OPENAI_API_KEY]")
    check.add_argument("--only", metavar="S1,S2",
                       help=f"run only these scenarios: {', '.join(SCENARIOS)}")
    check.add_argument("--sse-file", metavar="FILE",
                       help="check a saved SSE stream (a file, or - for stdin) instead of a server")
    check.add_argument("--spec", metavar="FILE", default=os.environ.get("OPENRESPONSES_SPEC"),
                       help="the Open Responses OpenAPI document: also validate every event and response against it "
                            "[OPENRESPONSES_SPEC]")
    check.add_argument("--json", action="store_true", help="print a JSON report (for CI) instead of text")
    check.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report with event timelines")
    check.add_argument("--timeout", type=float, default=120, help="seconds per request [default 120]")


def _base_url(url: str) -> str:
    url = url.rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


def _fail(message: str) -> SystemExit:
    """Exit status 2: the check could not run."""
    print(f"responses-gateway check: {message}", file=sys.stderr)
    return SystemExit(2)


def _sse_file(path: str, validator: Validator) -> ScenarioResult:
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise _fail(str(exc)) from None
    ex = Exchange("saved stream", "FILE", path)
    validator.stream_checked(ex, inspect_stream(raw, require_done=False))
    return ScenarioResult("sse-file", f"the stream saved in {path}", [ex])


def _validator(spec_path: str | None) -> object | None:
    if not spec_path:
        return None
    try:
        from .schema import SpecValidator
    except ImportError as exc:
        raise _fail(f"--spec needs jsonschema ({exc}); pip install 'responses-gateway[check]'") from None
    if not Path(spec_path).is_file():
        raise _fail(f"no spec document at {spec_path}")
    return SpecValidator(spec_path)


def run(args: argparse.Namespace) -> int:
    spec = _validator(args.spec)
    if args.sse_file:
        results = [_sse_file(args.sse_file, Validator(spec))]
        target = args.sse_file
    else:
        if not args.url or not args.model:
            raise _fail("give URL and --model (or --sse-file FILE)")
        names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else list(SCENARIOS)
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            raise _fail(f"unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
        base_url = _base_url(args.url)
        results = asyncio.run(run_scenarios(base_url, args.model, names, api_key=args.api_key, spec=spec,
                                            timeout=args.timeout))
        target = f"{base_url} (model {args.model})"
    if spec is None:
        results[0].notes.append("event and response shapes not validated against the spec document (no --spec)")
    print(json_report(results, target) if args.json else text_report(results, target), end="")
    if args.html:
        Path(args.html).write_text(html_report(results, target), encoding="utf-8")
    return 0 if passed(results) else 1

