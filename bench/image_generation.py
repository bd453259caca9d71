"""What image generation costs the gateway: `python -m bench.image_generation [--responses N] [--quick]`.

1. What an image call adds beyond the images server's own time, for a 1 MiB PNG. The gateway runs as its own
   process (`responses-gateway serve --image-generation …`) in front of a fake model and the fake images server
   (tests/support, in this process, on loopback), which answers a 1 MiB noise PNG (it does not compress, as a
   photograph does not). Timed, each over N streamed responses after a warm-up:
   - the image turn: the model calls image_generation once, the gateway asks the images server, streams the
     item (its `output_item.done` and the final response each carry the 1.4 MB of base64), the model answers;
   - the same answer without the tool (one upstream step);
   - the images server alone, asked directly over loopback the same way the gateway asks it.
   What the call adds = image turn − plain answer − images server alone (wall time, medians); the gateway's CPU
   per response (utime + stime from /proc/<pid>/stat) is given besides. With the store (SQLite: the image
   decoded and written to the files store, fsync included), without (`--db none`), and with the store but without
   pybase64 (the standard library's base64).
2. RSS while 16 calls run at once: the images server holds each answer for a second, so 16 image responses are
   in flight together; the gateway's resident memory is sampled every 10 ms, and its peak is compared with the
   process at rest just before.

Loopback only; bounded counts; it stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.run import ROOT, Proc, clean_env, free_port, wait_http

TARGET_MS = 5.0
IMAGE_BYTES = 1 << 20
CONCURRENT = 16


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# The gateway without pybase64 (the `image-generation` extra): its import fails, the standard library's base64
# does the work.
WITHOUT_PYBASE64 = ("import sys; sys.modules['pybase64'] = None; sys.argv[0] = 'responses-gateway'; "
                    "from responses_gateway.cli import main; main()")


@contextmanager
def gateway(upstream: str, images: str, db: str, tmp: Path, stdlib: bool = False) -> Iterator[tuple[str, int]]:
    port = free_port()
    start = ["-c", WITHOUT_PYBASE64] if stdlib else ["-m", "responses_gateway"]
    proc = Proc(f"gateway-{port}", [sys.executable, *start, "serve", "--upstream", upstream,
                                    "--port", str(port), "--db", db, "--log-level", "warning",
                                    "--image-generation", images], tmp, clean_env(str(ROOT / "src")))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", proc, 60)
        yield base, proc.pid
    finally:
        proc.stop()


def model(request: Any) -> Any:
    """The fake model: an image_generation call first, then the answer; a plain request answers at once."""
    from tests.support.fake_chat import Stream, text_stream, tool_calls_stream

    body = request.body or {}
    messages = body.get("messages") or []
    if body.get("tools") and not any(m.get("role") == "tool" for m in messages):
        return Stream(tool_calls_stream([("c1", "image_generation", [json.dumps({"prompt": "noise"})])]))
    return Stream(text_stream(["Here is your picture."]))


IMAGE = {"model": "m", "input": "Draw noise.", "stream": True, "tools": [{"type": "image_generation"}]}
PLAIN = {"model": "m", "input": "Draw noise.", "stream": True}


def timed(client: Any, body: dict[str, Any], count: int, pid: int) -> tuple[float, float]:
    """(median wall ms, CPU ms of the gateway per response) over `count` responses."""
    walls = []
    before = cpu_seconds(pid)
    for _ in range(count):
        t0 = time.perf_counter()
        resp = client.post("/v1/responses", json=body)
        resp.raise_for_status()
        walls.append((time.perf_counter() - t0) * 1000)
        if b"response.completed" not in resp.content:
            raise RuntimeError("a response did not complete: " + resp.text[-500:])
    return statistics.median(walls), (cpu_seconds(pid) - before) / count * 1000


def delivery(client: Any, images: Any, count: int) -> float:
    """Median ms from the images server's answer written whole to the client holding the image's
    `output_item.done`: the gateway's own work on the image (reading it, checking it, its events), the rest of
    the transfer over loopback included."""
    delays = []
    for _ in range(count):
        with client.stream("POST", "/v1/responses", json=IMAGE) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if line.startswith("data: ") and '"response.output_item.done"' in line[:80] \
                        and "image_generation_call" in line[:300]:
                    delays.append((time.perf_counter() - images.sent_at[-1]) * 1000)
    return statistics.median(delays)


def direct(images_url: str, count: int) -> float:
    """The images server alone: median wall ms of the gateway's own request, asked over loopback and its answer
    read whole (not parsed: what a client then does with it is its own cost)."""
    import httpx

    walls = []
    with httpx.Client(timeout=30) as client:
        for _ in range(count + 5):
            t0 = time.perf_counter()
            resp = client.post(f"{images_url}/images/generations",
                               json={"prompt": "noise", "response_format": "b64_json"})
            resp.raise_for_status()
            if len(resp.content) < IMAGE_BYTES:
                raise RuntimeError("the images server answered no image")
            walls.append((time.perf_counter() - t0) * 1000)
    return statistics.median(walls[5:])


def one_case(up: Any, images: Any, db: str, tmp: Path, responses: int, stdlib: bool = False) -> dict[str, float]:
    import httpx

    with gateway(up.base_url, images.base_url, db, tmp, stdlib) as (base, pid), httpx.Client(base_url=base, timeout=60) as client:
        for body in (IMAGE, PLAIN):
            timed(client, body, 5, pid)  # warm up
        image_ms, image_cpu = timed(client, IMAGE, responses, pid)
        plain_ms, plain_cpu = timed(client, PLAIN, responses, pid)
        delivered = delivery(client, images, responses)
    alone = direct(images.base_url, responses)
    return {"image_turn_ms": image_ms, "plain_ms": plain_ms, "images_server_ms": alone,
            "adds_ms": image_ms - plain_ms - alone, "delivery_ms": delivered, "image_turn_cpu_ms": image_cpu,
            "plain_cpu_ms": plain_cpu, "adds_cpu_ms": image_cpu - plain_cpu}


def concurrent_rss(up: Any, images: Any, db: str, tmp: Path) -> dict[str, float]:
    import httpx

    images.delay = 1.0
    try:
        with gateway(up.base_url, images.base_url, db, tmp) as (base, pid):
            with httpx.Client(base_url=base, timeout=60) as client:
                timed(client, IMAGE, 2, pid)
            time.sleep(0.5)
            rest = rss_mb(pid)
            peak = rest
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, rss_mb(pid))
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()

            async def burst() -> float:
                async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                    t0 = time.perf_counter()
                    answers = await asyncio.gather(*(client.post("/v1/responses", json=IMAGE)
                                                      for _ in range(CONCURRENT)))
                    for resp in answers:
                        resp.raise_for_status()
                        assert b"response.completed" in resp.content
                    return time.perf_counter() - t0

            took = asyncio.run(burst())
            stop.set()
            sampler.join()
    finally:
        images.delay = 0.0
    return {"rss_rest_mb": rest, "rss_peak_mb": peak, "rss_added_mb": peak - rest, "burst_s": took}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=100, help="responses measured per case")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few responses")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.support.fake_chat import FakeChatUpstream
    from tests.support.fake_images import FakeImages

    count = 5 if args.quick else args.responses
    report: dict[str, Any] = {}
    with FakeImages() as images, FakeChatUpstream() as up, tempfile.TemporaryDirectory() as tmp:
        images.image_bytes = IMAGE_BYTES
        up.default = model
        where = Path(tmp)
        report["stored"] = one_case(up, images, str(where / "bench.db"), where, count)
        report["db_none"] = one_case(up, images, "none", where, count)
        report["stored_stdlib"] = one_case(up, images, str(where / "stdlib.db"), where, count, stdlib=True)
        report["concurrent"] = concurrent_rss(up, images, str(where / "rss.db"), where)
    print("| case | image turn | plain answer | images server alone | the turn adds (wall) | image delivered after "
          "the server's answer | the turn adds (gateway CPU) |")
    print("|---|---|---|---|---|---|---|")
    for name, case in (("SQLite store", report["stored"]), ("--db none", report["db_none"]),
                       ("SQLite store, without pybase64", report["stored_stdlib"])):
        verdict = "PASS" if case["delivery_ms"] <= TARGET_MS else "MISS"
        print(f"| {name} | {case['image_turn_ms']:.1f} ms | {case['plain_ms']:.1f} ms | "
              f"{case['images_server_ms']:.1f} ms | {case['adds_ms']:.1f} ms | {case['delivery_ms']:.1f} ms "
              f"({verdict} ≤ {TARGET_MS:g} ms) | {case['adds_cpu_ms']:.1f} ms |")
    burst = report["concurrent"]
    print(f"RSS with {CONCURRENT} image calls at once (1 MiB each): {burst['rss_peak_mb']:.0f} MB peak, "
          f"{burst['rss_added_mb']:.0f} MB above the gateway at rest ({burst['rss_rest_mb']:.0f} MB); the burst "
          f"took {burst['burst_s']:.1f} s")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
