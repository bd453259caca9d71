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


def _sse_file(path: str) -> ScenarioResult:
    raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    checked = inspect_stream(raw, require_done=False)
    ex = Exchange("saved stream", "FILE", path, events=checked.events, violations=checked.violations,
                  body=checked.terminal and checked.terminal.get("response"))
    return ScenarioResult("sse-file", f"the stream saved in {path}", [ex])


def _validator(spec_path: str | None) -> object | None:
    if not spec_path:
        return None
    try:
        from .schema import SpecValidator
    except ImportError as exc:
        raise SystemExit(f"responses-gateway check: --spec needs jsonschema ({exc}); "
                         "pip install 'responses-gateway[check]'") from None
    if not Path(spec_path).is_file():
        raise SystemExit(f"responses-gateway check: no spec document at {spec_path}")
    return SpecValidator(spec_path)


def run(args: argparse.Namespace) -> int:
    spec = _validator(args.spec)
    if args.sse_file:
        try:
            results = [_sse_file(args.sse_file)]
        except OSError as exc:
            raise SystemExit(f"responses-gateway check: {exc}") from None
        if spec is not None:
            Validator(spec).events(results[0].exchanges[0])
        target = args.sse_file
    else:
        if not args.url or not args.model:
            raise SystemExit("responses-gateway check: give URL and --model (or --sse-file FILE)")
        names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else list(SCENARIOS)
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            raise SystemExit(f"responses-gateway check: unknown scenario {', '.join(unknown)}; "
                             f"known: {', '.join(SCENARIOS)}")
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

