"""The gateway's instructions per streamed response, counted by callgrind: a measure that a busy machine does not move.

    python -m bench.instructions                       # every case, this tree's gateway
    python -m bench.instructions --gateway-src DIR     # another tree's src/ (compare two versions)
    python -m bench.instructions --cases paced100,paced10 --scale 2
    python -m bench.instructions --server translator   # the lean translator under the same load
    python -m bench.instructions --store false          # responses without the store's work

The gateway runs under `valgrind --tool=callgrind --instr-atstart=no` (about 50x slower, so rates and
concurrencies are small); the fake upstream and the load generator run natively. Per case: a warm-up round,
then callgrind counts (`callgrind_control -i on` ... `-i off`, then a dump) while N streamed requests run,
store on. It prints instructions per response and, from the two paced cases (same pace per response time,
100 and 10 tokens), the split into a fixed part per response and a part per token.

Instructions are user space only (no kernel time: syscalls, loopback networking), and how reads coalesce
still depends on timing: under callgrind an unpaced upstream's 256 tokens arrive in a few reads, so
`unpaced` measures the per-event Python work; the paced cases get one read per token, as a real model gives.
Repeat runs agree to about 1 %.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import load
from bench.run import Proc, clean_env, free_port, post_json, wait_http

# name: (fake upstream config, concurrency, warm-up requests, measured requests, tokens per response)
CASES: dict[str, tuple[dict, int, int, int, int]] = {
    "unpaced": ({"tokens": 256, "delay_ms": 0.0}, 16, 16, 96, 256),
    "one_token": ({"tokens": 1, "delay_ms": 0.0}, 16, 16, 96, 1),
    "paced100": ({"tokens": 100, "delay_ms": 20.0}, 4, 4, 16, 100),
    "paced10": ({"tokens": 10, "delay_ms": 200.0}, 4, 4, 16, 10),
    "health": ({}, 4, 16, 96, 0),  # GET /health: the HTTP server's and the middleware's floor per request
}


async def health_requests(url: str, n: int, concurrency: int) -> int:
    """`n` GET /health at `concurrency` on kept-alive connections; returns how many answered 200."""
    import aiohttp

    ok = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def one() -> None:
            nonlocal ok
            async with session.get(f"{url}/health") as resp:
                await resp.read()
                ok += resp.status == 200

        for start in range(0, n, concurrency):
            await asyncio.gather(*(one() for _ in range(min(concurrency, n - start))))
    return ok


def total_instructions(dump: Path, timeout: float = 30.0) -> int:
    """The `totals:` line, which callgrind writes last (the dump may still be being written)."""
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(r"^totals:\s+(\d+)", dump.read_text(), re.M)
        if found is not None:
            return int(found.group(1))
        if time.monotonic() > deadline:
            raise RuntimeError(f"no totals in {dump}")
        time.sleep(0.2)


def by_object(dump: Path) -> dict[str, int]:
    """Self instructions per object file (the interpreter, uvloop, orjson, libsqlite3, libc ...) in a callgrind
    dump: Python code itself counts as the interpreter's (python3.x / libpython)."""
    names: dict[str, str] = {}
    out: dict[str, int] = {}
    current = "?"
    skip = False

    def name_of(ref: str) -> str:
        ref = ref.strip()
        if ref.startswith("(") and ")" in ref:
            key, _, rest = ref.partition(")")
            if rest.strip():
                names[key] = rest.strip()
            return names.get(key, ref)
        return ref

    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("ob="):
            current = name_of(line[3:])
        elif line.startswith("cob="):
            name_of(line[4:])  # registers the id only
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost, not self cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip:
                skip = False
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                out[current] = out.get(current, 0) + int(parts[1])
    return out


def short_object(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    for mark in ("site-packages/", "lib-dynload/"):
        if mark in path:
            return path.split(mark, 1)[1].split("/", 1)[0] if mark == "site-packages/" else base
    return base


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)


def measure(case: str, scale: float, up_url: str, gw: Proc, gw_url: str, out: Path, store: bool = True) -> dict:
    config, concurrency, warm, n, tokens = CASES[case]
    n = max(1, int(n * scale))
    if case == "health":
        asyncio.run(health_requests(gw_url, warm, concurrency))
        control("-z", str(gw.pid))
        control("-i", "on", str(gw.pid))
        answered = asyncio.run(health_requests(gw_url, n, concurrency))
        control("-i", "off", str(gw.pid))
        result = load.RunResult(samples=[load.Sample(ok=True, reads=1) for _ in range(answered)])
        return _dumped(case, n, tokens, gw, out, result)
    for url in up_url.split(","):  # each replica of a pool (--pool)
        post_json(f"{url}/_bench/config", {**config, "first_token_ms": None})
    body = load.request_body("gateway", store=store)
    asyncio.run(load.run_load(gw_url, "gateway", warm, concurrency, body, 600))
    control("-z", str(gw.pid))
    control("-i", "on", str(gw.pid))
    result = asyncio.run(load.run_load(gw_url, "gateway", n, concurrency, body, 3000))
    control("-i", "off", str(gw.pid))
    return _dumped(case, n, tokens, gw, out, result)


def _dumped(case: str, n: int, tokens: int, gw: Proc, out: Path, result: load.RunResult) -> dict:
    before = set(out.glob("callgrind.*"))
    control("-d", case, str(gw.pid))
    deadline = time.monotonic() + 30
    while not (new := set(out.glob("callgrind.*")) - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    ok = [s for s in result.samples if s.ok]
    if len(ok) != n or not new:
        raise RuntimeError(f"{case}: {len(ok)} of {n} responses, dump {'written' if new else 'missing'}")
    dump = max(new, key=lambda p: p.stat().st_mtime)
    per = total_instructions(dump) / n
    objects: dict[str, float] = {}
    for obj, ir in by_object(dump).items():
        objects[short_object(obj)] = objects.get(short_object(obj), 0.0) + ir / n
    return {"case": case, "responses": n, "tokens": tokens, "instructions": per, "objects": objects,
            "reads": sum(s.reads for s in ok) / n}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every case's request count")
    p.add_argument("--gateway-src", help="run the gateway from this src/ directory")
    p.add_argument("--store", choices=("true", "false"), default="true",
                   help="`store` of the requests: false counts a response without the store's work [true]")
    p.add_argument("--db", default=None, help="the gateway's --db [a SQLite file in a temporary directory]; "
                                              "none: no store at all")
    p.add_argument("--pool", action="store_true",
                   help="the gateway's upstream a pool of two replicas (two fake upstreams): what "
                        "pool routing costs (docs/routing.md, \"Pools\")")
    p.add_argument("--server", choices=("gateway", "translator"), default="gateway",
                   help="count the gateway's instructions, or the lean translator's (bench/lean_translator.py) "
                        "under the same load")
    p.add_argument("--by-object", type=int, default=0, metavar="N",
                   help="also print the N object files with the most self instructions (the interpreter — Python "
                        "code — uvloop, orjson, libsqlite3, libc ...) per response, and their paced split")
    opts = p.parse_args(argv)
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="rg-instructions-") as tmp:
        out = Path(tmp)
        up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0"], out, clean_env(),
                  capture_stdout=True)
        up2 = Proc("upstream2", [sys.executable, "-m", "bench.fake_upstream", "--port", "0"], out, clean_env(),
                   capture_stdout=True) if opts.pool else None
        gw = None
        try:
            up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
            wait_http(f"{up_url}/health", up)
            second = None
            if up2 is not None:
                second = up2.first_line(timeout=20).split()[-2].removesuffix("/v1")
                wait_http(f"{second}/health", up2)
            port = free_port()
            if opts.server == "translator":
                server = ["bench.lean_translator", "--upstream", f"{up_url}/v1", "--port", str(port)]
            else:
                upstream = f"{up_url}/v1" + (f",{second}/v1" if second else "")
                # the load's requests are one session: with no load bound they all stay on its replica, so the
                # upstream's side is the same as without a pool and the difference is the pool's own work
                pooled = ["--affinity-max-load", "1000000"] if second else []
                server = ["responses_gateway", "serve", "--upstream", upstream, "--host", "127.0.0.1",
                          "--port", str(port), "--db", opts.db or str(out / "responses.db"), "--log-level", "warning",
                          *pooled]
            gw = Proc("gateway", ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                  f"--callgrind-out-file={out}/callgrind.%p", sys.executable, "-m", *server],
                      out, clean_env(opts.gateway_src))
            gw_url = f"http://127.0.0.1:{port}"
            wait_http(f"{gw_url}/health", gw, timeout=300)
            rows = {}
            for case in opts.cases.split(","):
                row = rows[case] = measure(case, opts.scale, up_url + (f",{second}" if second else ""), gw, gw_url, out,
                                           store=opts.store == "true")
                per_token = f"{row['instructions'] / row['tokens'] / 1e3:8.1f} k/token all-in, " if row["tokens"] else ""
                print(f"{case:10s} {row['instructions'] / 1e6:8.3f} M instructions/{'request' if case == 'health' else 'response'}  "
                      f"({per_token}{row['responses']} {'requests' if case == 'health' else 'responses'}, "
                      f"{row['reads']:.1f} client reads/response)", flush=True)
            if opts.by_object:
                for case, row in rows.items():
                    top = sorted(row["objects"].items(), key=lambda kv: -kv[1])[:opts.by_object]
                    print(f"{case}: by object, k instructions per {'request' if case == 'health' else 'response'}: "
                          + ", ".join(f"{name} {ir / 1e3:.0f}" for name, ir in top))
                if "paced100" in rows and "paced10" in rows:
                    hi, lo = rows["paced100"]["objects"], rows["paced10"]["objects"]
                    per_tok = {k: (hi.get(k, 0.0) - lo.get(k, 0.0)) / 90 for k in set(hi) | set(lo)}
                    top = sorted(per_tok.items(), key=lambda kv: -kv[1])[:opts.by_object]
                    print("paced split by object, instructions per token: "
                          + ", ".join(f"{name} {ir / 1e3:.1f}k" for name, ir in top))
                    per_resp = {k: lo.get(k, 0.0) - 10 * per_tok[k] for k in per_tok}
                    top = sorted(per_resp.items(), key=lambda kv: -kv[1])[:opts.by_object]
                    print("paced split by object, k instructions per response: "
                          + ", ".join(f"{name} {ir / 1e3:.0f}" for name, ir in top))
            if "paced100" in rows and "paced10" in rows:
                hi, lo = rows["paced100"]["instructions"], rows["paced10"]["instructions"]
                per_token = (hi - lo) / 90
                print(f"paced split: {(hi - 100 * per_token) / 1e6:.3f} M instructions per response "
                      f"+ {per_token / 1e3:.1f} k per token")
        finally:
            if gw is not None:
                gw.stop()
            up.stop()
            if up2 is not None:
                up2.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
