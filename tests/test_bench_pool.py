"""The benchmarks' C++ driver reads a pool of states holding only the inputs of the kernels it
times (benchmarks/measure.py). It used to hold every declared input: since fd_derivatives_minv
declared M⁻¹ (nv² values a state), a driver timing a 10 000-link chain's rnea allocated 12.8 GB
of it and `make bench-rolled` ran out of memory."""
from __future__ import annotations

import numpy as np

from rbdgen import registry
from rbdgen.targets.cpu.emit import generate_cpu

from conftest import ROBOTS, bench_module, load_case


def _measure():
    return bench_module("measure")


def test_the_driver_pool_holds_the_inputs_of_its_kernels_only():
    bench = _measure()
    m = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    nv = m.nv
    assert bench.pool_sizes(m, ["rnea"]) == {"q": m.nq, "v": nv, "a": nv}
    assert bench.pool_sizes(m, ["gravity", "crba"]) == {"q": m.nq}
    # M⁻¹ only where a timed kernel reads it, in the declared inputs' order
    sizes = bench.pool_sizes(m, ["fd_derivatives_minv", "rnea"])
    assert list(sizes) == [n for n in registry.INPUTS if n in sizes]
    assert sizes["Minv"] == nv * nv and "tau" not in sizes

    kernels = ["rnea", "fd_derivatives_minv"]
    n = 3
    assert "Minv" not in bench.states(m, np.random.default_rng(0), n, ["rnea", "rnea_stale"])
    st = bench.states(m, np.random.default_rng(0), n, kernels)
    assert "Minv" in st
    blob = bench.pool_bytes(st, m, kernels)
    assert len(blob) == 8 * n * sum(sizes.values())
    # the file holds each pooled input's states in turn: M⁻¹'s last
    minv = np.frombuffer(blob, dtype=np.float64)[-n * nv * nv:].reshape(n, nv * nv)
    np.testing.assert_array_equal(minv, st["Minv"].reshape(n, nv * nv))

    # the driver reads the file with the same layout: its per-state size and the arrays it declares
    gen = generate_cpu(m, dtypes=("float64",), kernels=kernels, python=False)
    src = bench.driver_source(gen, m)
    assert f"buf((size_t)pool * {sum(sizes.values())})" in src
    assert " MI = " in src and " ST = " not in src and " FE = " not in src


def test_complete_inputs_stops_after_the_last_input_needed():
    m = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    q = m.random_q(np.random.default_rng(1), 2)
    env = registry.complete_inputs(m, {"q": q}, seed=2, names={"v", "tau"})
    assert list(env) == ["q", "v", "a", "tau"]
    full = registry.complete_inputs(m, {"q": q}, seed=2)
    assert set(full) == set(registry.INPUTS)
    for k in env:  # the same draws
        np.testing.assert_array_equal(env[k], full[k])


def test_random_inputs_stop_after_the_last_input_needed(monkeypatch):
    """Validation draws the inputs its kernels read and none declared after them: the same
    values as drawing every input, without M⁻¹'s nv² a state (a 3 000-link chain's 16 states:
    1.2 GB and ~10¹² flops of products to draw)."""
    from rbdgen import validate as V

    m = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    full = registry.random_inputs(m, 3, seed=5)
    for names, drawn in [({"q", "v", "a"}, ["q", "v", "a"]), ({"q", "stale"}, ["q", "v", "a", "tau", "stale"]),
                         ({"q", "Minv"}, list(registry.INPUTS)), (set(), [])]:
        part = registry.random_inputs(m, 3, seed=5, names=names)
        assert list(part) == drawn
        for k in part:
            np.testing.assert_array_equal(part[k], full[k])
    st = V.random_states(m, 2, 0, ["rnea", "aba"])
    assert "Minv" not in st and {"q", "v", "a", "tau"} <= set(st)

    # rbdgen.validate on kernels that do not read M⁻¹ never draws it
    def no_minv(*a, **k):
        raise AssertionError("M⁻¹ drawn for kernels that do not read it")
    monkeypatch.setattr(registry, "_sample_spd", no_minv)
    rows = V.validate(m, kernels=["gravity"], states=2, pinocchio=False)
    assert [r.kernel for r in rows] == ["gravity"] and rows[0].passed
