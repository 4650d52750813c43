"""fd_derivatives_minv: seed 001's Algorithm 3 with M⁻¹ given (its footnote 1: cached).

Oracles: the NumPy reference (−M⁻¹ · rbdgen.reference.rnea_derivatives, for any M⁻¹ given),
Pinocchio's own forward-dynamics derivatives (computeABADerivatives at τ = rnea(q, v, q̈), with
M(q)⁻¹ given), and aba_derivatives at the same state (the reference's; on a GPU the compiled one); on every target: the CPU (float64,
float32, the batch path), the CUDA program's host emulation, the HLS C simulation in ap_fixed and
the Verilog module in Verilator (bit for bit with that C simulation, in the latency its schedule
gives).
"""
from __future__ import annotations

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen.errors import RbdgenError, UnsupportedError
from rbdgen.targets.hls.emit import DEFAULT_CLOCK_MHZ, measured_bound, numeric_type
from rbdgen.targets.hls.schedule import PARTS, budget_cost
from rbdgen.validate import pinocchio_model

from conftest import ROBOTS, TOL32, TOL64, kernel_errors, load_case, random_state

K = "fd_derivatives_minv"


def _case(name, floating=False):
    return load_case(next(r for r in ROBOTS if r.name == name), floating)


def _pinocchio_fd_derivatives(model, q, v, qdd):
    pin, pm = pinocchio_model(model)
    assert pin is not None, pm  # a test dependency the Makefile installs
    data = pm.createData()
    out_q, out_v = [], []
    for i in range(len(q)):
        qp = model.to_pinocchio_q(q[i])
        tau = pin.rnea(pm, data, qp, v[i], qdd[i]).copy()
        ddq, ddv, _ = pin.computeABADerivatives(pm, data, qp, v[i], tau)
        out_q.append(ddq.copy())
        out_v.append(ddv.copy())
    return np.array(out_q), np.array(out_v)


def _rel(x, y):
    return float(np.max(np.abs(x - y)) / max(1.0, np.max(np.abs(y))))


def test_opt_in_and_refusals():
    """Built only when named (default selections keep their size); a coupled mimic model is
    refused naming the kernel; a wrong M⁻¹ shape is a ValueError naming the argument."""
    from rbdgen.algorithms import KERNELS, OPT_IN

    assert K in OPT_IN and K not in KERNELS  # KERNELS: what a default build has
    assert registry.get(K).opt_in and registry.get(K).input_names == ("q", "v", "a", "Minv")
    coupled = next(r for r in ROBOTS if r.name == "panda_coupled").load(False)
    with pytest.raises(UnsupportedError, match=f"kernel {K} has no form for coupled mimic joints"):
        registry.trace(coupled, K)
    m = _case("iiwa14")
    kern = rbdgen.build(m, kernels=(K,), opt="-O1")
    assert kern.kernels == (K,)
    q, v, a, _ = random_state(m, seed=1)
    with pytest.raises((ValueError, RbdgenError), match="Minv"):
        kern.fd_derivatives_minv(q, v, a, np.eye(6))


def test_flat_matrices_take_the_binding_s_fast_path(monkeypatch):
    """M⁻¹ flat, (nv²,) or (N, nv²), as the registry draws it, is taken by the C binding itself:
    before, the binding refused it and the Python fallback reshaped it, ~28 µs a call on 16 states
    where the kernel takes ~8. The fallback is made to fail here, so only the binding can answer."""
    from rbdgen.kernels import loaded

    m = _case("iiwa14")
    kern = rbdgen.build(m, kernels=(K,), opt="-O1")
    n = 5
    q, v, a, _ = random_state(m, seed=2, n=n)
    Mi = registry.INPUTS["Minv"].sample(m, np.random.default_rng(2), n).reshape(n, m.nv, m.nv)
    want = kern.fd_derivatives_minv(q, v, a, Mi)

    def no_fallback(self, args):
        raise AssertionError("the Python fallback ran")
    monkeypatch.setattr(loaded._Method, "_as_structured", no_fallback)
    got = kern.fd_derivatives_minv(q, v, a, Mi.reshape(n, -1))
    one = kern.fd_derivatives_minv(q[1], v[1], a[1], Mi[1].ravel())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(one[0], want[0][1])


@pytest.mark.parametrize("name,floating", [("iiwa14", False), ("quadruped", True), ("baxter", False)],
                         ids=["iiwa14", "quadruped-floating", "baxter-branched"])
def test_cpu_matches_pinocchio_and_aba_derivatives(name, floating):
    """With M⁻¹ = M(q)⁻¹ the kernel's outputs are ∂q̈/∂q and ∂q̈/∂v at q̈: Pinocchio's
    computeABADerivatives at τ = rnea(q, v, q̈) and the reference aba_derivatives at that τ, batch
    and one state; with any other M⁻¹ they are −M⁻¹ ∂τ/∂u (the reference, on the registry's
    draws). (The compiled aba_derivatives is compared with the same numbers on the GPU test.)"""
    m = _case(name, floating)
    kern = rbdgen.build(m, kernels=(K,), opt="-O0")
    n = 9
    q, v, qdd, _ = random_state(m, seed=11, n=n)
    Mi = ref.minv(m, q)
    dq, dv = kern.fd_derivatives_minv(q, v, qdd, Mi)
    assert dq.shape == dv.shape == (n, m.nv, m.nv)
    pq, pv = _pinocchio_fd_derivatives(m, q, v, qdd)
    assert _rel(dq, pq) <= TOL64 and _rel(dv, pv) <= TOL64, (_rel(dq, pq), _rel(dv, pv))
    # the NumPy reference of aba_derivatives at τ = rnea(q, v, q̈): the ABA's route to the same numbers
    aq, av, _ = ref.aba_derivatives(m, q, v, ref.rnea(m, q, v, qdd))
    assert _rel(dq, aq) <= TOL64 and _rel(dv, av) <= TOL64
    one = kern.fd_derivatives_minv(q[4], v[4], qdd[4], Mi[4])
    np.testing.assert_allclose(one[0], dq[4], rtol=0, atol=1e-12 * max(1.0, np.abs(dq[4]).max()))
    errs = kernel_errors(kern, m, np.float64, seed=5, n=13, single=2)
    assert errs[K] <= TOL64, errs


def test_float32_within_its_bound():
    m = _case("quadruped", True)
    kern = rbdgen.build(m, kernels=(K,), dtype="float32", opt="-O0")
    errs = kernel_errors(kern, m, np.float32, seed=6, n=17, single=3)
    assert errs[K] <= TOL32[K], errs


def test_reference_is_minus_minv_times_the_rnea_derivatives():
    """The reference against an independent composition: central differences of the reference
    aba at τ = rnea(q, v, q̈) give ∂q̈/∂v (M⁻¹ = M(q)⁻¹)."""
    m = _case("iiwa14")
    q, v, qdd, _ = random_state(m, seed=3)
    Mi = ref.minv(m, q)
    _, dv = registry.reference(m, K, {"q": q, "v": v, "a": qdd, "Minv": Mi.ravel()})
    tau = ref.rnea(m, q, v, qdd)
    h = 1e-6
    fd = np.stack([(ref.aba(m, q, v + h * e, tau) - ref.aba(m, q, v - h * e, tau)) / (2 * h)
                   for e in np.eye(m.nv)], axis=1)
    assert _rel(dv, fd) <= 1e-7, _rel(dv, fd)


def test_cuda_emulated_both_shapes():
    from test_cuda import EMULATED_ARCH

    m = _case("iiwa14")
    kern = rbdgen.build(m, target="cuda", kernels=(K,), opt="-O0", arch=EMULATED_ARCH, werror=True)
    assert kern.info[K]["default_shape"] == "block"
    for shape in ("thread", "block"):
        errs = kernel_errors(kern.emulated(shape), m, np.float64, seed=8, n=37, single=3)
        assert errs[K] <= TOL64, (shape, errs)


def test_hls_and_verilog_bit_for_bit_in_under_100_cycles_on_a_vcu118():
    """ap_fixed<32,16>: the HLS C simulation within the kernel's declared bound of the reference
    and of Pinocchio (M⁻¹ = M(q)⁻¹, whose entries reach ~10² on the iiwa); the Verilog module
    within a VCU118's 6 840 DSP48E2 (issue 48's part) gives the C simulation's bits, and done
    rises, and the outputs are final, in the list schedule's latency: at most 100 cycles, the two
    products side by side after the datapath, every element at once (the plan of
    ``schedule.epilogue_plan`` that only a budget of ~2 700 DSPs reaches; the plans of smaller
    budgets are test_verilog's synthetic products and ∇FD within 100). Against aba_derivatives
    within the same part (which computes q̈ and M⁻¹ itself): docs/verilog.md's comparison with
    robomorphic computing."""
    m = _case("iiwa14")
    fixed, budget = (32, 16), PARTS["vcu118"][1]
    kh = rbdgen.build(m, target="hls", fixed=fixed, kernels=(K,))
    kv = rbdgen.build(m, target="verilog", fixed=fixed, kernels=(K,), dsp_budget=budget)
    nt = numeric_type("float64", fixed)
    bound = measured_bound(registry.get(K), nt)
    n = 6
    q, v, qdd, _ = random_state(m, seed=49, n=n)
    drawn = registry.INPUTS["Minv"].sample(m, np.random.default_rng(4), n).reshape(n, m.nv, m.nv)
    for Mi in (drawn, ref.minv(m, q)):
        got, want = kv.fd_derivatives_minv(q, v, qdd, Mi), kh.fd_derivatives_minv(q, v, qdd, Mi)
        exp = registry.reference(m, K, {"q": q, "v": v, "a": qdd, "Minv": Mi.reshape(n, -1)})
        for g, w, e in zip(got, want, exp):
            np.testing.assert_array_equal(g, w, err_msg="Verilator vs HLS C simulation")
            assert _rel(w, e) <= bound, (_rel(w, e), bound)
    bc = budget_cost(registry.trace(m, K), nt, DEFAULT_CLOCK_MHZ, budget, divider="narrow")
    c = kv.cycles(K)
    assert c["done"] == c["schedule"] == c["outputs_final"] == bc["latency_cycles"] <= 100, (c, bc["latency_cycles"])
    assert bc["epilogue_plan"] == (1, 2 * m.nv * m.nv), bc  # both products, every element in one step
    fd = budget_cost(registry.trace(m, "aba_derivatives"), nt, DEFAULT_CLOCK_MHZ, budget, divider="narrow")
    assert bc["dsp"] <= budget and bc["latency_cycles"] < fd["latency_cycles"] / 2, (bc, fd["latency_cycles"])


@pytest.mark.gpu
def test_gpu_every_shape_matches_the_reference():
    """On a GPU (skips here, saying why: no GPU is lent to this machine; the emulated test above
    runs the same program on the CPU): every launch shape, numpy and cupy arrays, against the
    reference and against aba_derivatives with M⁻¹ = M(q)⁻¹. The library is the one
    benchmarks/gpu_check.py builds beforehand (SEED001_BUILD)."""
    import sys
    from pathlib import Path

    from rbdgen.targets.cuda.nvcc import detect_archs
    from rbdgen.targets.cuda.runtime import _env_flag
    from test_cuda import _require_cupy

    # nvidia-smi first: test_cuda's guard builds the iiwa's whole emulated library to ask the runtime
    if not detect_archs() and not _env_flag("RBDGEN_REQUIRE_GPU"):
        pytest.skip("nvidia-smi lists no NVIDIA GPU here; the emulated test above runs the same GPU program on the CPU")
    cupy = _require_cupy()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gpu_check

    m = _case("iiwa14")
    kern = rbdgen.build(m, **gpu_check.SEED001_BUILD)
    n = 37
    q, v, qdd, _ = random_state(m, seed=10, n=n)
    Mi = ref.minv(m, q)
    exp = registry.reference(m, K, {"q": q, "v": v, "a": qdd, "Minv": Mi.reshape(n, -1)})
    tau = ref.rnea(m, q, v, qdd)
    fd = kern.aba_derivatives(q, v, tau)
    for shape in ("auto", "thread", "block"):
        got = kern.kernel(K)(q, v, qdd, Mi, shape=shape)
        dev = kern.kernel(K)(*map(cupy.asarray, (q, v, qdd, Mi)), shape=shape)
        for g, d, e, f in zip(got, dev, exp, fd):
            assert _rel(g, e) <= TOL64 and _rel(cupy.asnumpy(d), e) <= TOL64 and _rel(g, f) <= TOL64, shape
