"""The cyclic garbage collector is paused while a kernel is traced, rolled and printed
(rbdgen.gcpause), and is running again afterwards — also after an error, and with pauses nested
or on several threads; the trace is the same either way."""
from __future__ import annotations

import gc
import threading

import pytest

from rbdgen import gcpause, registry
from rbdgen.errors import RbdgenError

from conftest import ROBOTS, load_case


def _iiwa():
    return load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)


def test_trace_pauses_the_collector_and_restores_it(monkeypatch):
    from rbdgen.ir.graph import Graph

    seen = []
    real = Graph._new

    def spy(self, *args, **kw):
        seen.append(gc.isenabled())
        return real(self, *args, **kw)

    monkeypatch.setattr(Graph, "_new", spy)
    assert gc.isenabled()
    k = registry.trace(_iiwa(), "rnea", cached=False)
    assert seen and not any(seen) and gc.isenabled()
    monkeypatch.setattr(Graph, "_new", real)
    # the same graph as traced with the collector running (the pause changes no result)
    gc.collect()
    monkeypatch.setattr(gcpause, "paused", _running)
    k2 = registry.trace(_iiwa(), "rnea", cached=False)
    assert [(n.op, n.value, tuple(a.id for a in n.args)) for n in k.graph.nodes] == \
        [(n.op, n.value, tuple(a.id for a in n.args)) for n in k2.graph.nodes]


class _running:
    """A pause that pauses nothing (for the comparison above)."""
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_nested_failing_and_concurrent_pauses():
    assert gc.isenabled()
    with gcpause.paused():
        with gcpause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    with pytest.raises(RbdgenError):
        with gcpause.paused():
            raise RbdgenError("boom")
    assert gc.isenabled()
    inside, go = threading.Event(), threading.Event()

    def other():
        with gcpause.paused():
            inside.set()
            go.wait(10)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    with gcpause.paused():
        pass
    assert not gc.isenabled()  # the other thread's pause is still on
    go.set()
    t.join(10)
    assert gc.isenabled()
    # a collector the caller had switched off stays off
    gc.disable()
    try:
        with gcpause.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_a_pause_allocated_is_aged_not_walked_and_cycles_are_still_freed():
    """At the end of the outermost pause its objects go to the oldest generation without a
    collection (gcpause._age): the first allocation after it does not walk them all. Cyclic
    garbage made during the pause is still found by a full collection, and a process that froze
    objects itself keeps them frozen."""
    import weakref

    class Cyc:
        pass

    gc.collect()
    with gcpause.paused():
        keep = [[i] for i in range(20_000)]
        a, b = Cyc(), Cyc()
        a.other, b.other = b, a
        probe = weakref.ref(a)
        del a, b
    young, _, old = gc.get_count()
    assert young < 1_000, "the pause's objects were left in the youngest generation"
    assert any(x is keep[0] for x in gc.get_objects(generation=2))
    assert probe() is not None  # a cycle: reference counting does not free it ...
    gc.collect()
    assert probe() is None      # ... the next full collection does
    del keep
    # a process's own frozen objects stay frozen
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gcpause.paused():
            [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
