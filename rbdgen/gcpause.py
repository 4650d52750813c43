"""Python's cyclic garbage collector, paused while rbdgen builds a large graph of objects.

Tracing a kernel allocates a node and a value per operation (766 000 nodes for the aba of a
1 000-link chain) and keeps them all until the trace is done. Each allocation counts towards the
collector's thresholds, and every collection of the oldest generation walks the whole graph
built so far, so a trace spent ~40 % of its time in collections that find nothing: the nodes
hold references to earlier nodes only, no cycles (the chain's rnea, aba and rnea_scan: 25.3 s
with the collector, 14.1 s without). Paused for the trace, the rolled lowering's analysis and
the printing; memory is still freed by reference counting, and the collector runs again when
the outermost pause ends (nested and concurrent pauses share one count)."""
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
            if _depth == 0 and _was_enabled:
                gc.enable()


def pausing(f):
    """``f`` with the collector paused while it runs (:func:`paused`)."""
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        with paused():
            return f(*args, **kwargs)
    return wrapper
