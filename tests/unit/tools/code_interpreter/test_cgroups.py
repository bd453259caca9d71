"""cgroups.py's bookkeeping that needs no cgroup: the cgroups a killed gateway left are removed at start."""

from __future__ import annotations

import os

from responses_gateway.tools.code_interpreter.cgroups import forget_dead


def test_only_dead_gateways_cgroups_are_forgotten(tmp_path):
    dead = tmp_path / "responses-gateway-999999999-3"  # no such process
    mine = tmp_path / f"responses-gateway-{os.getpid()}-1"
    other = tmp_path / "something-else"
    for path in (dead, mine, other):
        path.mkdir()
    forget_dead(tmp_path)
    assert not dead.exists() and mine.exists() and other.exists()
