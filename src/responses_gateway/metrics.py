"""Process-wide counters, served at /metrics in Prometheus' text format."""

from __future__ import annotations

from collections import Counter

counters: Counter[str] = Counter()

HELP = {
    "responses_total": "Responses finished, by terminal status.",
    "store_failures_total": "Responses whose store write failed (the stream still ended properly).",
    "store_purged_total": "Expired responses removed by retention.",
}


def render() -> bytes:
    lines = []
    for name, text in HELP.items():
        full = f"responses_gateway_{name}"
        lines += [f"# HELP {full} {text}", f"# TYPE {full} counter"]
        labelled = {k: v for k, v in counters.items() if k.startswith(name + "{")}
        if labelled:
            lines += [f"responses_gateway_{k} {v}" for k, v in sorted(labelled.items())]
        else:
            lines.append(f"{full} {counters.get(name, 0)}")
    return ("\n".join(lines) + "\n").encode()
