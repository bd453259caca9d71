"""The gateway under cProfile, switched on and off by signals: `python -m bench.cprofile_serve OUT serve ARGS...`.

SIGUSR1 starts profiling the event loop's thread (where the request, the composer and the sends run),
SIGUSR2 stops it, writes the statistics to OUT (pstats format) and clears them for the next window. Only
the main thread is profiled: the SQLite store's writer thread is not (its cost shows in CPU time instead).
cProfile counts a coroutine's time only while it runs, so a function's cumulative time is the time spent in
it and below, not the time it waited. The profiler slows Python calls down, more for small functions than for
large ones: read its figures as shares, not as times (bench/where.py scales them to the measured CPU).
"""

from __future__ import annotations

import cProfile
import signal
import sys


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    prof = cProfile.Profile()

    def on(_signum, _frame) -> None:
        prof.enable()

    def off(_signum, _frame) -> None:
        prof.disable()
        prof.dump_stats(out)
        prof.clear()

    signal.signal(signal.SIGUSR1, on)
    signal.signal(signal.SIGUSR2, off)
    from responses_gateway.cli import main as cli

    cli(args)


if __name__ == "__main__":
    main()
