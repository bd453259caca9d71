"""Regression figures for the edge (issue 25), on loopback: what oversized heads and non-reading clients
cost a gateway process. Not timed tests: figures to compare runs and versions by.

    python -m bench.edge                       # both parts, about a minute and a half
    python -m bench.edge --part headers        # memory per header byte only
    python -m bench.edge --part readers        # how long a client that stops reading holds its response
    python -m bench.edge --part pipeline       # connections pipelining 16 MiB of GET /health each
    python -m bench.edge --part bodies         # 40 connections withholding the end of a 30 MiB body
    python -m bench.edge --src /work/main/src  # the same against another source tree (a before/after pair)

headers: a gateway process (`--db none`, default limits) gets connections that send request heads that
never end, in the three shapes the probe used — tiny header lines, one endless header value, and 20
connections of endless values at once — each connection sending up to `--header-mib` MiB within 5 s. The
process's RSS is sampled every 20 ms; reported are the peak growth over the idle process, the header bytes
the server accepted (the client's sent bytes), RSS bytes per header byte, and what the client got back.

readers: a client POSTs a streamed response (the fake upstream streams far more than the socket buffers
hold), reads about 2 KB, then reads nothing, with a 4 KiB receive buffer. Reported per setting: the seconds
until the gateway dropped the connection (the client's TCP state, read without reading the socket), how
the response was stored, and then the same with 8 such clients and `--max-in-flight 8` (is a 9th request
refused, and served once they are ended?) and at SIGTERM (stored, tracebacks in the log, exit time).

pipeline: 1 and then 3 connections each pipeline `--pipeline-mib` MiB of `GET /health` while reading every
answer; reported: the peak RSS growth, the answers, and the seconds it took (issue 34, R1).

bodies: 40 connections each send 30 MiB of a body announced as 30 MiB + 1 byte, then nothing; reported: the
peak RSS growth, how many were answered (and with what) within 30 s, and the RSS 5 s after (issue 34, R3).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import select
import signal
import socket
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from .load import rss_mib
from .run import Proc, clean_env, free_port, wait_http

TCP_ESTABLISHED = 1
WINDOW = 20.0  # seconds a held connection is watched before it is reported as held


# -- processes -----------------------------------------------------------------------------------------------

def start_upstream(log_dir: Path, src: str | None) -> tuple[Proc, str]:
    proc = Proc("fake_upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens",
                                  "400000", "--tokens-per-chunk", "32"], log_dir, clean_env(src),
                capture_stdout=True)
    url = re.search(r"(http://\S+/v1)", proc.first_line(20)).group(1)  # type: ignore[union-attr]
    return proc, url


def start_gateway(name: str, upstream: str, db: str, log_dir: Path, src: str | None, *flags: str) -> tuple[Proc, int]:
    port = free_port()
    proc = Proc(name, [sys.executable, "-m", "responses_gateway", "serve", "--upstream", upstream, "--port",
                       str(port), "--db", db, "--log-level", "warning", *flags], log_dir, clean_env(src))
    wait_http(f"http://127.0.0.1:{port}/health", proc)
    return proc, port


# -- headers ---------------------------------------------------------------------------------------------------

def _flood(port: int, start: bytes, line: bytes, limit: int, until: float) -> tuple[int, bytes]:
    """Send `start`, then `line` over and over (up to `limit` bytes, until `until`); bytes sent and the
    answer's first line."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    s.sendall(start)
    chunk = line * max(1, 65536 // len(line))
    sent, answer = 0, b""
    try:
        while time.monotonic() < until:  # sending up to `limit`, reading the answer until the server closes
            readable, writable, _ = select.select([s], [s] if sent < limit else [], [], 0.02)
            if readable:
                try:
                    data = s.recv(65536)
                except OSError:
                    break
                answer += data
                if not data:
                    break
            if writable:
                try:
                    sent += s.send(chunk)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    break
    finally:
        s.close()
    return sent, answer.split(b"\r\n", 1)[0]


def header_case(port: int, pid: int, label: str, line: bytes, start: bytes, conns: int, mib: int) -> dict:
    base = rss_mib([pid])
    peak = base
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, rss_mib([pid]))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    results: list[tuple[int, bytes]] = []
    until = time.monotonic() + 5
    head = b"GET /health HTTP/1.1\r\nHost: x\r\n" + start
    threads = [threading.Thread(target=lambda: results.append(_flood(port, head, line, mib << 20, until)))
               for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.3)
    stop.set()
    sampler.join()
    sent = sum(r[0] for r in results)
    growth = peak - base
    answers = sorted({r[1].decode(errors="replace") or "(closed, no answer)" for r in results})
    return {"case": label, "conns": conns, "sent_mib": sent / (1 << 20), "rss_base": base, "rss_growth": growth,
            "per_byte": (growth * (1 << 20)) / sent if sent else 0.0, "answer": "; ".join(answers)}


def headers(log_dir: Path, src: str | None, mib: int) -> list[dict]:
    rows = []
    cases = [("tiny header lines", b"X-A: b\r\n", b"", 1),
             ("one endless value", b"a" * 64, b"X-Big: ", 1),
             ("20 conns, endless values", b"a" * 64, b"X-Big: ", 20)]
    for label, line, start, conns in cases:  # a fresh process each: RSS does not shrink after a case
        gw, port = start_gateway("gateway-headers", "http://127.0.0.1:9/v1", "none", log_dir, src,
                                 "--header-timeout", "30")
        try:
            time.sleep(0.5)
            rows.append(header_case(port, gw.pid, label, line, start, conns, mib))
        finally:
            gw.stop()
    return rows


# -- readers ----------------------------------------------------------------------------------------------------

def stalled(port: int) -> tuple[socket.socket, str]:
    body = b'{"model":"bench-model","input":"hi","stream":true}'
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while len(got) < 2048 or b'"resp_' not in got:
        got += s.recv(2048)
    return s, re.search(rb'"(resp_[0-9a-zA-Z]+)"', got).group(1).decode()  # type: ignore[union-attr]


def held_for(s: socket.socket, window: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < window:
        if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != TCP_ESTABLISHED:
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def stored_status(db: str, rid: str) -> str:
    with contextlib.suppress(sqlite3.Error), sqlite3.connect(db) as conn:
        row = conn.execute("SELECT body FROM responses WHERE id = ?", (rid,)).fetchone()
        if row is not None:
            status = re.search(rb'"status":"(\w+)"', row[0] if isinstance(row[0], bytes) else row[0].encode())
            message = re.search(rb'"message":"([^"]{0,60})', row[0] if isinstance(row[0], bytes) else row[0].encode())
            return f"{status.group(1).decode() if status else '?'}" + (
                f" ({message.group(1).decode()}…)" if message else "")
    return "not stored"


def post_status(port: int) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/responses", data=b'{"model":"bench-model","input":"x","max_output_tokens":16}',
                headers={"content-type": "application/json"}), timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def readers(log_dir: Path, src: str | None, tmp: Path) -> list[dict]:
    upstream, url = start_upstream(log_dir, src)
    rows = []
    try:
        settings = [("--send-timeout 5", ["--send-timeout", "5"]),
                    ("--upstream-total-timeout 5", ["--upstream-total-timeout", "5"]),
                    ("neither (total 3600)", [])]
        for label, flags in settings:
            db = str(tmp / f"{len(rows)}.db")
            if "--send-timeout" not in flags:
                flags = ["--send-timeout", "0", *flags]
            try:
                gw, port = start_gateway("gateway-readers", url, db, log_dir, src, *flags)
            except RuntimeError:  # an older tree: no --send-timeout (and none in effect)
                gw, port = start_gateway("gateway-readers", url, db, log_dir, src, *flags[2:])
                label += " [no --send-timeout]"
            try:
                s, rid = stalled(port)
                took = held_for(s, WINDOW)
                time.sleep(0.5)
                rows.append({"setting": label, "held": f"{took:.1f} s" if took is not None else f"≥ {WINDOW:g} s",
                             "stored": stored_status(db, rid)})
                s.close()
            finally:
                gw.stop()
        rows.extend(many(log_dir, src, url, tmp))
    finally:
        upstream.stop()
    return rows


def many(log_dir: Path, src: str | None, url: str, tmp: Path) -> list[dict]:
    """8 stalled clients with --max-in-flight 8: a 9th request, then again once they are ended; then SIGTERM
    with 8 more."""
    rows = []
    db = str(tmp / "many.db")
    flags = ["--max-in-flight", "8", "--drain-timeout", "3", "--send-timeout", "5"]
    try:
        gw, port = start_gateway("gateway-many", url, db, log_dir, src, *flags)
    except RuntimeError:
        flags = flags[:4]
        gw, port = start_gateway("gateway-many", url, db, log_dir, src, *flags)
    try:
        clients = [stalled(port) for _ in range(8)]
        ninth = post_status(port)
        ends = [held_for(s, WINDOW) for s, _ in clients]
        after = post_status(port)
        stored = [stored_status(db, rid).split()[0] for _, rid in clients]
        rows.append({"setting": "8 stalled, --max-in-flight 8", "held": f"9th request: {ninth}; after "
                     f"{max((e for e in ends if e is not None), default=WINDOW):.1f} s: {after}",
                     "stored": f"{stored.count('failed')} of 8 failed"})
        for s, _ in clients:
            s.close()
        clients = [stalled(port) for _ in range(8)]
        started = time.monotonic()
        gw.popen.send_signal(signal.SIGTERM)
        gw.popen.wait(timeout=60)
        took = time.monotonic() - started
        stored = [stored_status(db, rid).split()[0] for _, rid in clients]
        log = gw.tail(1 << 20)
        rows.append({"setting": "SIGTERM, 8 stalled, --drain-timeout 3", "held": f"exit after {took:.1f} s",
                     "stored": f"{stored.count('failed')} of 8 failed; {log.count('Traceback')} tracebacks"})
        for s, _ in clients:
            s.close()
    finally:
        gw.stop()
    return rows


HEALTH = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"


def _pipeline_one(port: int, total: int, counts: list[int], i: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    threading.Thread(target=lambda: sock.sendall(HEALTH * total), daemon=True).start()
    tail = b""
    while counts[i] < total:
        data = sock.recv(1 << 20)
        if not data:
            break
        chunk = tail + data
        counts[i] += chunk.count(b"HTTP/1.1 200 OK")
        tail = chunk[-16:]
    sock.close()


def pipeline(log_dir: Path, src: str | None, mib: int) -> list[dict]:
    rows = []
    up, url = start_upstream(log_dir, src)
    try:
        for conns in (1, 3):
            gw, port = start_gateway(f"gw-pipeline-{conns}", url, "none", log_dir, src)
            try:
                for _ in range(200):
                    post_health(port)
                base = rss_mib([gw.pid])
                total = mib * 1024 * 1024 // len(HEALTH)
                counts = [0] * conns
                workers = [threading.Thread(target=_pipeline_one, args=(port, total, counts, i), daemon=True)
                           for i in range(conns)]
                started = time.monotonic()
                for w in workers:
                    w.start()
                peak = base
                while any(w.is_alive() for w in workers) and time.monotonic() - started < 300:
                    peak = max(peak, rss_mib([gw.pid]))
                    time.sleep(0.02)
                rows.append(dict(conns=conns, sent_mib=mib * conns, requests=total * conns, answered=sum(counts),
                                 seconds=time.monotonic() - started, base=base, growth=peak - base))
            finally:
                gw.stop()
    finally:
        up.stop()
    return rows


def post_health(port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as answer:
        answer.read()


def bodies(log_dir: Path, src: str | None) -> dict:
    up, url = start_upstream(log_dir, src)
    gw, port = start_gateway("gw-bodies", url, "none", log_dir, src)
    try:
        base = rss_mib([gw.pid])
        socks = []
        size = 30 * 1024 * 1024
        chunk = b" " * (1024 * 1024)

        def send(sock: socket.socket) -> None:
            with contextlib.suppress(OSError):
                sock.sendall(b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n" % (size + 1))
                for _ in range(30):
                    sock.sendall(chunk)

        started = time.monotonic()
        for _ in range(40):
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            socks.append(sock)
            threading.Thread(target=send, args=(sock,), daemon=True).start()
        peak, answers = base, {}
        while time.monotonic() - started < 30 and len(answers) < len(socks):
            peak = max(peak, rss_mib([gw.pid]))
            readable, _, _ = select.select([s for s in socks if s not in answers], [], [], 0.02)
            for s in readable:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                answers[s] = (data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed",
                              time.monotonic() - started)
        kinds: dict[str, int] = {}
        for status, _ in answers.values():
            kinds[status] = kinds.get(status, 0) + 1
        for s in socks:
            s.close()
        time.sleep(5)
        return dict(base=base, growth=peak - base, answers=kinds, unanswered=len(socks) - len(answers),
                    last=max((t for _, t in answers.values()), default=0.0), after=rss_mib([gw.pid]) - base)
    finally:
        gw.stop()
        up.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.edge", description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("headers", "readers", "pipeline", "bodies", "all"), default="all")
    p.add_argument("--pipeline-mib", type=int, default=16, help="MiB each pipelining connection sends [16]")
    p.add_argument("--src", help="run this source tree's gateway (put first on PYTHONPATH)")
    p.add_argument("--header-mib", type=int, default=24, help="MiB each flooding connection sends at most [24]")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-edge-") as tmp:
        log_dir = Path(tmp)
        if args.part in ("headers", "all"):
            print("| head | connections | header MiB sent | idle RSS MiB | RSS growth MiB | RSS bytes per header byte | answer |")
            print("|---|---|---|---|---|---|---|")
            for r in headers(log_dir, args.src, args.header_mib):
                print(f"| {r['case']} | {r['conns']} | {r['sent_mib']:.1f} | {r['rss_base']:.0f} | "
                      f"{r['rss_growth']:.0f} | {r['per_byte']:.2f} | {r['answer']} |", flush=True)
        if args.part in ("readers", "all"):
            print("\n| client reads 2 KB, then nothing | held | stored |")
            print("|---|---|---|")
            for r in readers(log_dir, args.src, log_dir):
                print(f"| {r['setting']} | {r['held']} | {r['stored']} |", flush=True)
        if args.part in ("pipeline", "all"):
            print("\n| pipelining connections | MiB sent | requests | answered | seconds | idle RSS MiB | RSS growth MiB |")
            print("|---|---|---|---|---|---|---|")
            for r in pipeline(log_dir, args.src, args.pipeline_mib):
                print(f"| {r['conns']} | {r['sent_mib']} | {r['requests']} | {r['answered']} | {r['seconds']:.1f} | "
                      f"{r['base']:.0f} | {r['growth']:.0f} |", flush=True)
        if args.part in ("bodies", "all"):
            r = bodies(log_dir, args.src)
            print("\n| 40 bodies of 30 MiB withheld | RSS growth MiB | answers within 30 s | unanswered | last answer s "
                  "| RSS 5 s after, MiB over idle |")
            print("|---|---|---|---|---|---|")
            print(f"| default limits | {r['growth']:.0f} | {r['answers']} | {r['unanswered']} | {r['last']:.1f} | "
                  f"{r['after']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
