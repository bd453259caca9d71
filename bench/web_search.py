"""What web search costs the gateway: `python -m bench.web_search [--responses N]`.

1. A search turn, besides the provider's own time: the gateway runs as its own process (`responses-gateway
   serve --web-search searxng=…`) in front of a fake model and a fake SearXNG (tests/support, in this process, on
   loopback). The gateway's CPU time (utime + stime, /proc/<pid>/stat) is read around N responses in which the
   model calls web_search once and then answers citing a result (two upstream steps, one provider request, the
   citations annotator on), and around N plain answers of the same text (one step). The search turn's extra CPU
   per response is what a search adds — its second upstream step included — and none of the provider's time
   (another process) or the model's.
2. A 5 MB HTML page fetched (over loopback, behind the SSRF guard) and made readable, in a fresh child process:
   wall and CPU time of each part, and the child's peak RSS above what it had after its imports; then the same
   page made readable as the runner does it, in a reader process of its own (readable.py), and a hostile page
   (100,000 nested `<div>`, 1.1 MB): what it costs before it is given up (wall, and its reader's CPU).

Loopback only; bounded counts; it stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 5.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def search_turn(responses: int) -> dict[str, float]:
    import httpx

    from tests.support.fake_chat import FakeChatUpstream, Stream, text_stream, tool_calls_stream
    from tests.support.fake_web import FakeWeb

    with FakeWeb() as web, FakeChatUpstream() as up:
        article = web.page("article")
        answer = ["The range is 3.50% to 3.75% ", f"([127.0.0.1]({article}))", "."]

        def model(request):  # a search first, then the answer; a plain request answers at once
            body = request.body or {}
            messages = body.get("messages") or []
            if body.get("tools") and not any(m.get("role") == "tool" for m in messages):
                return tool_calls_stream([("c1", "web_search", [json.dumps({"queries": ["fed rate"]})])])
            return text_stream(answer)

        up.default = lambda request: Stream(model(request))
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        proc = subprocess.Popen([sys.executable, "-m", "responses_gateway", "serve", "--upstream", up.base_url,
                                 "--port", str(port), "--db", "none", "--log-level", "warning",
                                 "--web-search", f"searxng={web.url}/searxng", "--web-search-cache-ttl", "0",
                                 "--web-search-rate", "0"], env=env, cwd=ROOT)
        try:
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=30) as client:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        if client.get("/health").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError("the gateway did not start")
                    time.sleep(0.1)
                searched = {"model": "m", "input": "rate?", "stream": True, "tools": [{"type": "web_search"}]}
                plain = {"model": "m", "input": "rate?", "stream": True}

                def measure(body: dict) -> float:
                    for _ in range(10):  # warm up
                        client.post("/v1/responses", json=body).raise_for_status()
                    before = cpu_seconds(proc.pid)
                    for _ in range(responses):
                        resp = client.post("/v1/responses", json=body)
                        resp.raise_for_status()
                        assert b"response.completed" in resp.content
                    return (cpu_seconds(proc.pid) - before) / responses * 1000

                with_search = measure(searched)
                without = measure(plain)
                cited = b"response.output_text.annotation.added" in client.post("/v1/responses",
                                                                               json=searched).content
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return {"search_turn_cpu_ms": with_search, "plain_answer_cpu_ms": without,
            "search_adds_cpu_ms": with_search - without, "cited": float(cited)}


CHILD = """
import asyncio, json, resource, sys, time
sys.path[:0] = [{src!r}, {root!r}]
from responses_gateway.tools.web_search.domains import DomainPolicy
from responses_gateway.tools.web_search.extract import extract
from responses_gateway.tools.web_search.fetch import fetch
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
w0, c0 = time.perf_counter(), time.process_time()
got = asyncio.run(fetch({url!r}, policy=DomainPolicy(), allow_hosts=({host!r},), timeout=30, max_bytes=8 * 2**20))
w1, c1 = time.perf_counter(), time.process_time()
page = extract(got.body, got.content_type, got.charset, got.url)
w2, c2 = time.perf_counter(), time.process_time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from responses_gateway.tools.web_search.fetch import FetchError
from responses_gateway.tools.web_search.readable import readable
def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
w3, k3 = time.perf_counter(), children_cpu()
isolated = asyncio.run(readable(got, 60.0, asyncio.Semaphore(1)))  # as the runner does: in a child process
w4, k4 = time.perf_counter(), children_cpu()
assert isolated.text == page.text
hostile = asyncio.run(fetch({nested!r}, policy=DomainPolicy(), allow_hosts=({host!r},), timeout=30,
                            max_bytes=8 * 2**20))
w5 = time.perf_counter()
try:
    asyncio.run(readable(hostile, {limit!r}, asyncio.Semaphore(1)))
    refused = ""
except FetchError as exc:
    refused = str(exc)
w6, k6 = time.perf_counter(), children_cpu()
print(json.dumps({{"bytes": len(got.body), "text_chars": len(page.text), "fetch_ms": (w1 - w0) * 1000,
                  "fetch_cpu_ms": (c1 - c0) * 1000, "extract_ms": (w2 - w1) * 1000,
                  "extract_cpu_ms": (c2 - c1) * 1000, "rss_added_mb": (peak - base) / 1024,
                  "rss_peak_mb": peak / 1024, "isolated_ms": (w4 - w3) * 1000,
                  "isolated_cpu_ms": (k4 - k3) * 1000, "hostile_bytes": len(hostile.body),
                  "hostile_ms": (w6 - w5) * 1000, "hostile_cpu_ms": (k6 - k4) * 1000, "hostile_error": refused}}))
"""


def big_page(limit: float = 5.0) -> dict[str, float]:
    from tests.support.fake_web import FakeWeb

    with FakeWeb() as web:
        code = CHILD.format(src=str(ROOT / "src"), root=str(ROOT), url=web.page("big"), host=web.host,
                            nested=web.page("nested"), limit=limit)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=200, help="responses measured per case")
    parser.add_argument("--extract-timeout", type=float, default=5.0,
                        help="the hostile page's bound (--web-extract-timeout)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    turn = search_turn(args.responses)
    page = big_page(args.extract_timeout)
    print(f"search turn: {turn['search_turn_cpu_ms']:.2f} ms CPU per response; plain answer "
          f"{turn['plain_answer_cpu_ms']:.2f} ms; a search adds {turn['search_adds_cpu_ms']:.2f} ms "
          f"({'PASS' if turn['search_adds_cpu_ms'] <= TARGET_MS else 'MISS'} ≤ {TARGET_MS:g} ms)")
    print(f"5 MB page: {page['bytes'] / 2**20:.1f} MiB fetched in {page['fetch_ms']:.0f} ms "
          f"({page['fetch_cpu_ms']:.0f} ms CPU), made readable in {page['extract_ms']:.0f} ms "
          f"({page['extract_cpu_ms']:.0f} ms CPU, {page['text_chars']} characters); peak RSS "
          f"{page['rss_peak_mb']:.0f} MB, {page['rss_added_mb']:.0f} MB above the process after its imports; in "
          f"its child process as the runner reads it: {page['isolated_ms']:.0f} ms ({page['isolated_cpu_ms']:.0f} "
          "ms CPU)")
    print(f"hostile page ({page['hostile_bytes'] / 2**20:.1f} MiB of nested <div>): given up after "
          f"{page['hostile_ms']:.0f} ms, {page['hostile_cpu_ms']:.0f} ms of its reader's CPU "
          f"(bound {args.extract_timeout:g} s): {page['hostile_error']}")
    print(json.dumps({"search_turn": turn, "page": page}))


if __name__ == "__main__":
    main()
