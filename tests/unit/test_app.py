"""app.freeze_startup: what is alive when `serve` has built the app leaves the cyclic collector's sight."""

import gc

from responses_gateway.app import GC_YOUNG, freeze_startup


def test_startup_objects_are_frozen_and_garbage_is_not():
    class Cycle:
        pass

    garbage = Cycle()
    garbage.me = garbage  # a cycle nothing refers to: collected, not frozen
    del garbage
    alive = [{"kept": True}]
    assert gc.get_freeze_count() == 0
    before = gc.get_threshold()
    try:
        freeze_startup()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG, *before[1:])  # young collections 28x rarer than CPython's 700
        assert gc.is_tracked(alive) and not any(type(o) is Cycle for o in gc.get_objects())
        assert not any(o is alive for o in gc.get_objects(generation=2))  # no collection walks it
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
