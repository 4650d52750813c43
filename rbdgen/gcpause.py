"""Python's cyclic garbage collector, paused while rbdgen builds a large graph of objects.

Tracing a kernel allocates a node and a value per operation (766 000 nodes for the aba of a
1 000-link chain) and keeps them all until the trace is done. Each allocation counts towards the
collector's thresholds, and every collection of the oldest generation walks the whole graph
built so far, so a trace spent ~40 % of its time in collections that find nothing: the nodes
hold references to earlier nodes only, no cycles (the chain's rnea, aba and rnea_scan: 25.3 s
with the collector, 14.1 s without). Paused for the trace, the rolled lowering's analysis and
the printing; memory is still freed by reference counting, and the collector runs again when
the outermost pause ends (nested and concurrent pauses share one count), with what the pause
allocated moved to the oldest generation (:func:`_age`), not walked at once."""
from __future__ import annotations

import contextlib
import functools
import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused():
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _age()
                if _was_enabled:
                    gc.enable()


def _age() -> None:
    """Move every object the collector tracks into its oldest generation without a collection.
    The objects allocated while paused are all still in the youngest generation, and the first
    allocation after the pause would otherwise collect it: a walk over the whole trace (1 s for
    a 1 000-link chain's rnea_scan, ~2 s at 3 000 links, at the end of each pause). ``freeze``
    then ``unfreeze`` moves them (list splices, no walk); cyclic garbage among them, if any, is
    found by the next full collection as usual, so nothing is kept that would have been freed."""
    if gc.get_freeze_count():
        return  # the process froze objects of its own (before a fork): leave its choice alone
    gc.freeze()
    gc.unfreeze()


def pausing(f):
    """``f`` with the collector paused while it runs (:func:`paused`)."""
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        with paused():
            return f(*args, **kwargs)
    return wrapper
