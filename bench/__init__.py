"""Benchmark harness: a fast fake Chat Completions upstream, a load generator and the one-command runner.

    python -m bench.run            # see bench/README.md
"""
