"""Generated C++ kernels, compiled and loaded, against the NumPy reference.

Coverage (and why it is not a full cross product): every kernel on every robot case in
float64 — except four robots whose trees another compiled robot repeats (SAME_TREE_AS_ANOTHER),
and the two derivative kernels of robots with nv > 20 (the humanoids and tiago),
whose unrolled sources take minutes to compile, and their scans and stale-data variants
(BIG_LEFT_OUT); their IR (the same statements the printer
writes) is checked against the reference on every robot by test_ir.py, and the printer is
exercised on the derivative kernels of every smaller robot here. float32 runs on a subset that
covers serial, continuous-joint, branched floating-base and humanoid trees, and the SIMD batch
path (a second instantiation of every kernel) on serial and branched floating-base trees; the
rest run the scalar OpenMP batch path. A robot loaded both ways is compiled floating only
(its fixed-base tree is the floating one without the free-flyer: the same branches, bodies and
joints), except the bundled quadruped, which is compiled both ways; fixed-base branched trees
stay covered by tiago, baxter and quadruped-fixed, and test_ir.py runs every kernel of every case,
fixed ones included, through the interpreter. Tests compile at
-O0 to keep CI short (no -ffast-math: the optimisation level does not change the arithmetic); one
test builds the user-facing default (-O3).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen.algorithms import KERNELS
from rbdgen.errors import CompilerNotFoundError

from conftest import (ROBOT_CASES, SCANS_AND_STALE_VARIANTS, TOL32, TOL64, by_robot, kernel_args, kernel_err,
                      kernel_errors, load_case, random_state, ref_out)

BIG_NV = 20
F32_CASES = ("iiwa14-fixed", "kinova-fixed", "quadruped-floating", "g1-fixed")
# the SIMD batch path doubles compile time (a second instantiation of every kernel); it is
# exercised on these, the scalar OpenMP batch path on the rest
SIMD_CASES = ("iiwa14-fixed", "kinova-fixed", "quadruped-floating", "solo12-floating")
N = 11  # > the lanes of the SIMD batch path (4 or 8): full blocks and a scalar remainder

_built: dict = {}


#: left out of the robots with nv > BIG_NV besides the derivatives (see the module doc): 40 % of a
#: humanoid's source without the derivatives (TALOS: 61 000 of 152 000 statements), compiled here
#: on every smaller robot
BIG_LEFT_OUT = SCANS_AND_STALE_VARIANTS


def _kernels_for(model):
    return tuple(k for k in KERNELS if not (model.nv > BIG_NV and (k.endswith("_derivatives") or k in BIG_LEFT_OUT)))


def _build(case_id, model, dtype, **kw):
    key = (case_id, dtype, tuple(sorted(kw.items())))
    if key not in _built:
        kw.setdefault("simd", case_id in SIMD_CASES)
        # -O0: the same arithmetic as -O3 (-std=c++17: no FMA contraction, no reordering) for half
        # the compile time of -O1 (the SIMD path too: iiwa14's 24 kernels 7.6 s against 14.6)
        _built[key] = rbdgen.build(model, dtype=dtype, kernels=_kernels_for(model), opt="-O0", **kw)
    return _built[key]


def _check(kern, model, dtype, tol):
    errs = kernel_errors(kern, model, dtype, seed=31, n=N, single=4)
    bad = {k: e for k, e in errs.items() if not e <= tol(k)}
    assert not bad, f"{model.name} {dtype}: errors above bound: {bad}"


#: robots whose compiled kernels would repeat another's tree here (CI time: ~76 s of compiles on the
#: 2-core VM, docs/performance.md §39): hyq and anymal are floating 12-joint quadrupeds like solo12
#: and the bundled quadruped, ur10 is ur5's chain with other lengths, icub_reduced a floating
#: humanoid like talos_reduced and g1. The printer writes the statements test_ir.py interprets,
#: and it checks these robots' every kernel, fixed and floating, against the reference
#: (hyq's rank-one base inertia included); test_reference_vs_pinocchio.py checks that reference.
SAME_TREE_AS_ANOTHER = ("hyq", "anymal", "ur10", "icub_reduced")

#: the cases compiled in float64 (see the module doc: fixed variants of robots that have a floating one
#: are left out, but for the bundled quadruped; so are SAME_TREE_AS_ANOTHER)
COMPILED_CASES = [c for c in ROBOT_CASES
                  if (c.values[1] or c.values[0].name == "quadruped" or True not in c.values[0].floating)
                  and c.values[0].name not in SAME_TREE_AS_ANOTHER]


@pytest.mark.parametrize("robot,floating", by_robot(COMPILED_CASES))  # the traces test_ir's tests of the robot made
def test_float64_kernels_match_reference(robot, floating, request):
    m = load_case(robot, floating)
    kern = _build(request.node.callspec.id, m, "float64")
    _check(kern, m, np.float64, lambda k: TOL64)


#: strided batches: two SIMD cases (fixed and floating base) and one on the scalar OpenMP batch path
STRIDED_CASES = ("iiwa14-fixed", "quadruped-floating", "ur5-fixed")


@pytest.mark.parametrize("robot,floating,dtype", [
    pytest.param(*c.values, dt, id=c.id + ("" if dt == "float64" else "-f32"))
    for c in ROBOT_CASES if c.id in STRIDED_CASES
    for dt in ("float64", "float32") if dt == "float64" or c.id in F32_CASES])
def test_batches_with_strided_rows(robot, floating, dtype, request):
    """A batch whose rows are strided — each input a column block of one packed array, rows
    reversed, an input broadcast from one state, outputs written into column blocks of a wider
    array — goes to the strided entry point without a copy and gives, bit for bit, what the same
    rows give as C-contiguous arrays (the same states in the same SIMD lanes), through the
    binding and through the ctypes method; and within the dtype's bound of the NumPy reference.
    float32 shares the template: checked where this file builds it (F32_CASES)."""
    m = load_case(robot, floating)
    kern = _build(request.node.callspec.id.removesuffix("-f32"), m, dtype)
    q, v, a, tau = random_state(m, seed=17, n=N)
    contiguous = np.ascontiguousarray
    for k in kern.kernels:
        f, method = kern.kernel(k), kern.methods[k]
        args = [np.asarray(x, dtype=dtype) for x in kernel_args(k, q, v, a, tau, m)]
        sizes = [x.shape[1] for x in args]
        packed = np.hstack([np.full((N, 1), np.nan, dtype=dtype)] + args)  # column 0: padding, never read
        cols = [packed[:, o:o + s] for o, s in zip(1 + np.cumsum([0] + sizes[:-1]), sizes)]
        assert not any(c.flags.c_contiguous for c in cols) or len(cols) == 0
        exp = f(*[contiguous(c) for c in cols])
        exp = exp if isinstance(exp, tuple) else (exp,)
        ref_exp = ref_out(m, k, *[x.astype(np.float64) for x in args])
        assert kernel_err(exp if len(exp) > 1 else exp[0], ref_exp) <= (TOL64 if dtype == "float64" else TOL32[k]), k

        def same(got, want, how):
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"{k}: {how}")

        same(f(*cols), exp, "column blocks of a packed array")
        same(method(*cols), exp, "column blocks, ctypes method")
        rev = [c[::-1] for c in cols]
        want_rev = f(*[contiguous(r) for r in rev])
        same(f(*rev), want_rev if isinstance(want_rev, tuple) else (want_rev,), "reversed rows")
        # outputs into column blocks of one wide array, its other columns untouched
        shapes = [tuple(o.shape[1:]) for o in exp]
        osz = [int(np.prod(s)) for s in shapes]
        for call in (f, method):
            wide = np.full((N, sum(osz) + 3), -7.0, dtype=dtype)
            offs = 2 + np.cumsum([0] + osz[:-1])
            outs = tuple(wide[:, o:o + z].reshape((N,) + s) for o, z, s in zip(offs, osz, shapes))
            assert all(np.shares_memory(o, wide) for o in outs)
            call(*cols, out=outs if len(outs) > 1 else outs[0])
            same(outs, exp, f"strided out= ({'binding' if call is f else 'ctypes'})")
            assert (wide[:, :2] == -7.0).all() and (wide[:, -1] == -7.0).all()
    # one state broadcast over the batch (stride 0): as if repeated
    k = kern.kernels[0]
    args = [np.asarray(x, dtype=dtype) for x in kernel_args(k, q, v, a, tau, m)]
    bcast = [np.broadcast_to(x[3], x.shape) if i == len(args) - 1 else x for i, x in enumerate(args)]
    got, want = kern.kernel(k)(*bcast), kern.kernel(k)(*[contiguous(x) for x in bcast])
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)


def _states_last(x):
    """(N, ...) → (..., N), C-contiguous: the states last."""
    return np.ascontiguousarray(np.moveaxis(x, 0, -1))


@pytest.mark.parametrize("robot,floating,dtype", [
    pytest.param(*c.values, dt, id=c.id + ("" if dt == "float64" else "-f32"))
    for c in ROBOT_CASES if c.id in STRIDED_CASES
    for dt in ("float64", "float32") if dt == "float64" or c.id in F32_CASES])
def test_states_last_layout(robot, floating, dtype, request):
    """layout="states_last" (issue 49): inputs (size, N) and outputs (..., N), the state axis last
    and unit-strided, go to the library's _batch_lanes entry point (vector loads and stores, no
    transposes; on the scalar batch path a gather per state) and give, bit for bit, what the rows
    layout gives (the same states in the same lanes; the tests' builds contract no FMAs, so the
    last, partial block, which the rows path runs state by state, agrees too), and within the
    dtype's bound of the NumPy reference. Rows of more than N values (views of wider arrays) are
    read and written in place, their other columns untouched."""
    m = load_case(robot, floating)
    kern = _build(request.node.callspec.id.removesuffix("-f32"), m, dtype)
    q, v, a, tau = random_state(m, seed=23, n=N)
    tol = TOL64 if dtype == "float64" else None
    for k in kern.kernels:
        f, method = kern.kernel(k), kern.methods[k]
        args = [np.asarray(x, dtype=dtype) for x in kernel_args(k, q, v, a, tau, m)]
        exp = f(*args)
        exp = exp if isinstance(exp, tuple) else (exp,)
        got = f(*[_states_last(x) for x in args], layout="states_last")
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            assert g.shape == e.shape[1:] + (N,), k
            np.testing.assert_array_equal(np.moveaxis(g, -1, 0), e, err_msg=f"{k}: states_last vs rows")
        ref_exp = ref_out(m, k, *[x.astype(np.float64) for x in args])
        moved = tuple(np.moveaxis(g, -1, 0) for g in got)
        assert kernel_err(moved if len(moved) > 1 else moved[0], ref_exp) <= (tol or TOL32[k]), k
        # leading dimensions above N: inputs and outputs as views of wider arrays, the ctypes
        # method alike; the columns past N stay as they were
        wide_in = []
        for x in args:
            w = np.full(x.shape[1:] + (N + 5,), np.nan, dtype=dtype)
            w[..., :N] = _states_last(x)
            wide_in.append(w[..., :N])
        wide_out = [np.full(e.shape[1:] + (N + 3,), -7.0, dtype=dtype) for e in exp]
        for call in (f, method):
            res = call(*wide_in, out=tuple(w[..., :N] for w in wide_out) if len(exp) > 1 else wide_out[0][..., :N],
                       layout="states_last")
            for w, e in zip(wide_out, exp):
                np.testing.assert_array_equal(np.moveaxis(w[..., :N], -1, 0), e, err_msg=f"{k}: out= with ld > N")
                assert (w[..., N:] == -7.0).all(), k
            assert np.shares_memory(res if len(exp) == 1 else res[0], wide_out[0])


def test_states_last_refusals_and_power_of_two_rows():
    """What layout="states_last" cannot take is refused naming the argument (the rows layout's
    shape, a state axis that is not unit-strided, outputs whose rows overlap, states that do not
    agree, an unknown layout); an output the library allocates for a batch of 2^k states has its
    rows padded (a view), the others are C-contiguous; N = 0 returns empty outputs."""
    m = _iiwa()
    kern = rbdgen.build(m, kernels=("rnea", "forward_kinematics"), opt="-O1")
    q, v, a, _ = random_state(m, seed=5, n=8)
    Q, V, A = (_states_last(x) for x in (q, v, a))
    for call in (kern.rnea, kern.methods["rnea"]):
        with pytest.raises(ValueError, match=r"rnea: argument 'q' has shape \(8, 7\); layout='states_last' takes \(7, N\)"):
            call(q, v, a, layout="states_last")
        with pytest.raises(ValueError, match=r"rnea: argument 'v' .* is not laid out states last"):
            call(Q, np.asfortranarray(V), A, layout="states_last")
        with pytest.raises(ValueError, match=r"rnea: argument 'a' has 7 states \(its last axis\), 'q' has 8"):
            call(Q, V, A[:, :7], layout="states_last")
        with pytest.raises(ValueError, match=r"rnea: argument 'v' has dtype float32"):
            call(Q, V.astype(np.float32), A, layout="states_last")
        with pytest.raises(ValueError, match=r"rnea: argument 'v' is float64 in non-native byte order \(big-endian\)"):
            call(Q, V.astype(">f8"), A, layout="states_last")
        buf = np.zeros(8 * 7)
        overlapping = np.lib.stride_tricks.as_strided(buf, (7, 8), (4 * 8, 8))
        with pytest.raises(ValueError, match=r"rnea: out= array 'tau' .* is not laid out states last with rows of at least N"):
            call(Q, V, A, out=overlapping, layout="states_last")
        assert not buf.any()
        with pytest.raises(ValueError, match=r"rnea: layout='cols'; the batch layouts are 'rows', 'states_last'"):
            call(Q, V, A, layout="cols")
        empty = call(np.zeros((7, 0)), np.zeros((7, 0)), np.zeros((7, 0)), layout="states_last")
        assert empty.shape == (7, 0)
    # "rows", the default, spelled out
    np.testing.assert_array_equal(kern.rnea(q, v, a, layout="rows"), kern.rnea(q, v, a))
    q2 = random_state(m, seed=6, n=256)[0]
    fk = kern.forward_kinematics(_states_last(q2), layout="states_last")
    assert fk.shape == (m.nb, 4, 4, 256) and not fk.flags.c_contiguous and fk.strides[-2] == (256 + 8) * 8
    np.testing.assert_array_equal(np.moveaxis(fk, -1, 0), kern.forward_kinematics(q2))
    fk = kern.forward_kinematics(_states_last(q2[:255]), layout="states_last")
    assert fk.flags.c_contiguous


def test_states_last_takes_the_binding_s_fast_path(monkeypatch):
    """Plain ndarrays laid out states last go straight from the C binding to _batch_lanes: the
    Python method (~20-70 µs of checks and ctypes a call, which made a batch of a few states 10×
    slower than the rows layout) is made to fail here, so only the binding can answer. Outputs it
    allocates, out= (one array, a tuple, views of wider arrays), M⁻¹ given flat as (nv², N) and
    rows of 2^k states (padded, as the method pads them) all give what the rows layout gives."""
    from rbdgen.kernels import loaded

    m = _iiwa()
    # the builds of test_states_last_refusals_and_power_of_two_rows and tests/test_fd_derivatives_minv.py
    kern = rbdgen.build(m, kernels=("rnea", "forward_kinematics"), opt="-O1")
    fdm = rbdgen.build(m, kernels=("fd_derivatives_minv",), opt="-O1")
    n, nv = 256, m.nv
    q, v, a, _ = random_state(m, seed=8, n=n)
    Mi = ref.minv(m, q)
    want = {"rnea": kern.rnea(q, v, a), "forward_kinematics": kern.forward_kinematics(q),
            "fd_derivatives_minv": fdm.fd_derivatives_minv(q, v, a, Mi)}
    Q, V, A, M = (_states_last(x) for x in (q, v, a, Mi))

    def no_fallback(self, args, out):
        raise AssertionError("the Python method ran")
    monkeypatch.setattr(loaded._Method, "_states_last", no_fallback)
    for count in (n, 255, 5, 1):  # 2^k rows (padded), a partial last block, fewer states than lanes
        tau = kern.rnea(Q[:, :count].copy(), V[:, :count].copy(), A[:, :count].copy(), layout="states_last")
        np.testing.assert_array_equal(tau.T, want["rnea"][:count])
        assert tau.flags.c_contiguous == (count != n) and (count != n or tau.strides[0] == (n + 8) * 8)
        fk = kern.forward_kinematics(Q[:, :count].copy(), layout="states_last")
        np.testing.assert_array_equal(np.moveaxis(fk, -1, 0), want["forward_kinematics"][:count])
    dq, dv = fdm.fd_derivatives_minv(Q, V, A, M.reshape(nv * nv, n), layout="states_last")  # M⁻¹ flat
    np.testing.assert_array_equal(np.moveaxis(dq, -1, 0), want["fd_derivatives_minv"][0])
    np.testing.assert_array_equal(np.moveaxis(dv, -1, 0), want["fd_derivatives_minv"][1])
    wide = [np.full((nv, nv, n + 3), -7.0) for _ in range(2)]
    res = fdm.fd_derivatives_minv(Q, V, A, M, out=tuple(w[..., :n] for w in wide), layout="states_last")
    assert all(np.shares_memory(r, w) for r, w in zip(res, wide))
    for w, e in zip(wide, want["fd_derivatives_minv"]):
        np.testing.assert_array_equal(np.moveaxis(w[..., :n], -1, 0), e)
        assert (w[..., n:] == -7.0).all()
    out = np.empty((nv, n))
    assert kern.rnea(Q, V, A, out=out, layout="states_last") is out
    np.testing.assert_array_equal(out.T, want["rnea"])
    # what the binding does not take still reaches the method (here made to fail)
    for bad in (dict(out=(out,)), dict(out=[out])):
        with pytest.raises(AssertionError, match="the Python method ran"):
            kern.rnea(Q, V, A, layout="states_last", **bad)
    with pytest.raises(AssertionError, match="the Python method ran"):  # two outputs in one array
        fdm.fd_derivatives_minv(Q, V, A, M, out=(wide[0][..., :n], wide[0][..., 1:n + 1]), layout="states_last")


def test_streaming_stores_write_what_plain_stores_write():
    """Above ``stream_bytes`` of output per call the rows layout's batches write with streaming
    stores (issue 49): the same values as plain stores, bit for bit, for contiguous outputs (the
    streamed path) and for outputs whose rows are strided (which keep plain stores), any batch
    size (partial blocks, a last run not a multiple of the 16-byte store); the threshold is read
    and set per library, negative or non-integer values refused."""
    m = _iiwa()
    kern = rbdgen.build(m, kernels=("forward_kinematics", "crba"), opt="-O1")
    assert kern.stream_bytes == 32 << 20
    for n in (1, 5, 8, 37):
        q = random_state(m, seed=n, n=n)[0]
        for k in ("forward_kinematics", "crba"):
            f = kern.kernel(k)
            kern.stream_bytes = 0
            plain = f(q)
            kern.stream_bytes = 1  # every batch streams
            np.testing.assert_array_equal(f(q), plain, err_msg=f"{k} N={n}: streamed")
            # an output 8 bytes off a 16-byte boundary: the streamed run starts and ends with a
            # value stored alone
            buf = np.full(plain.size + 2, -5.0)
            odd = buf[1:-1] if buf[1:].ctypes.data % 16 else buf[2:]
            out = odd[:plain.size].reshape(plain.shape)
            assert out.flags.c_contiguous and out.ctypes.data % 16 == 8
            f(q, out=out)
            np.testing.assert_array_equal(out, plain, err_msg=f"{k} N={n}: streamed, misaligned")
            wide = np.full((n, plain[0].size + 2), -3.0)
            out = wide[:, 1:-1].reshape(plain.shape)
            f(q, out=out)
            np.testing.assert_array_equal(out, plain, err_msg=f"{k} N={n}: strided rows")
            assert (wide[:, 0] == -3.0).all() and (wide[:, -1] == -3.0).all()
    kern.stream_bytes = 0
    assert kern.stream_bytes == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="stream_bytes must be a whole number of bytes >= 0"):
            kern.stream_bytes = bad


def test_strided_refusals_name_the_argument():
    """What the strided entry points cannot take is refused, by the binding and by the ctypes
    method alike, naming the argument: a state whose values are not adjacent, an output whose rows
    overlap, one state that is not contiguous."""
    m = _iiwa()
    kern = rbdgen.build(m, kernels=("rnea",), opt="-O1")  # test_bad_arguments' build
    q, v, a, _ = random_state(m, seed=3, n=6)
    for call in (kern.rnea, kern.methods["rnea"]):
        with pytest.raises(ValueError, match=r"rnea: argument 'v' is not C-contiguous within a state"):
            call(q, np.asfortranarray(v), a)
        with pytest.raises(ValueError, match=r"rnea: argument 'v' is not C-contiguous"):
            call(q[0], np.zeros((m.nv, 2))[:, 0], a[0])
        buf = np.zeros(6 * 3 + m.nv)
        overlapping = np.lib.stride_tricks.as_strided(buf, (6, m.nv), (3 * 8, 8))
        with pytest.raises(ValueError, match=r"rnea: out= array 'tau' has overlapping rows"):
            call(q, v, a, out=overlapping)
        assert not buf.any()


@pytest.mark.parametrize("robot,floating", [c for c in ROBOT_CASES if c.id in F32_CASES])
def test_float32_kernels_match_reference(robot, floating, request):
    m = load_case(robot, floating)
    kern = _build(request.node.callspec.id, m, "float32")
    _check(kern, m, np.float32, TOL32.get)


def _iiwa():
    case = [c for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0]
    return load_case(*case.values)


def test_default_build_is_optimised_and_correct():
    """The default build is -O3 for this machine (-march=native, one AVX register of states per
    vector where there is AVX) — the kernels are compiled where they run."""
    from rbdgen.toolchain.compiler import find_cxx, native_target, vector_bytes
    m = _iiwa()
    kern = rbdgen.build(m, kernels=("rnea", "crba", "aba"))
    with open(kern.path.rsplit("/", 1)[0] + "/command.txt") as f:
        flags = f.read().split()
    assert "-O3" in flags
    native = native_target(find_cxx()) is not None
    assert ("-march=native" in flags) == native
    width = vector_bytes("native" if native else None)
    assert kern.lanes == width // 8 > 1
    if width == 64:
        # AVX-512: 8 doubles for the kernels whose arithmetic pays for them (rnea, aba), 4 for
        # CRBA, which writes 49 values for ~400 multiplies and adds (docs/performance.md §17);
        # one library with both widths, checked against the reference below
        assert kern.kernel_lanes == {"rnea": 8, "crba": 4, "aba": 8}
    else:
        assert set(kern.kernel_lanes.values()) == {kern.lanes}
    _check(kern, m, np.float64, lambda k: TOL64)


def test_portable_build_and_march_setting(monkeypatch):
    """march="portable" (or $RBDGEN_MARCH=portable) builds for any x86-64: no -march, 16-byte
    vectors; a native build's cache key names the machine's instruction set, so that a cache
    shared between machines cannot hand one a library built for another."""
    from rbdgen.toolchain import compiler
    m = _iiwa()
    kerns = [rbdgen.build(m, kernels=("rnea",), march="portable", opt="-O1")]
    monkeypatch.setenv("RBDGEN_MARCH", "portable")
    kerns.append(rbdgen.build(m, kernels=("rnea",), opt="-O1"))
    assert kerns[0].path == kerns[1].path  # the same build, from the cache
    for kern in kerns:
        with open(kern.path.rsplit("/", 1)[0] + "/command.txt") as f:
            assert "-march" not in f.read()
        assert kern.lanes == 2
        _check(kern, m, np.float64, lambda k: TOL64)
    # sources generated for wider vectors than the build's registers (pickled on an AVX machine,
    # loaded on one without): correct, but said, since such batches are slow
    with pytest.warns(RuntimeWarning, match="wider than the 16-byte registers"):
        wide = rbdgen.build(m, kernels=("rnea",), march="portable", opt="-O1", lanes=4)
    _check(wide, m, np.float64, lambda k: TOL64)
    monkeypatch.delenv("RBDGEN_MARCH")
    assert compiler.resolve_march("portable") is None and compiler.resolve_march("x86-64-v3") == "x86-64-v3"
    cxx = compiler.find_cxx()
    if compiler.native_target(cxx) is None:  # a compiler that cannot target this machine
        assert compiler.resolve_march(None) is None
        return
    assert compiler.resolve_march(None) == "native"
    flags = compiler.cxx_flags(march="native")
    files = {"a.cpp": "int f() { return 1; }"}
    key = compiler.content_key(files, flags, cxx)
    assert key == compiler.content_key(files, flags, cxx)
    monkeypatch.setitem(compiler._native, cxx, "-march=another-cpu -mno-avx")
    assert compiler.content_key(files, flags, cxx) != key  # another machine, another library
    assert compiler.content_key(files, compiler.cxx_flags(), cxx) == compiler.content_key(files, compiler.cxx_flags(), cxx)


def test_large_kernels_compile_their_parts_for_size():
    """Without ``opt``, the straight-line parts of kernels of ≥ LARGE_STATEMENTS statements go to
    sources of their own compiled with -Os (faster: such kernels outgrow the instruction cache);
    each kernel's main source (its driver, the batch loop, ∇FD's looped product) stays at -O3.
    An ``opt`` given is used for every source."""
    from rbdgen.targets.cpu import LARGE_STATEMENTS, generate_cpu
    m = _iiwa()
    ks = ("rnea", "rnea_derivatives", "aba_derivatives")
    gen = generate_cpu(m, kernels=ks)
    n = {k: gen.kernels[k].n_statements for k in ks}
    assert n["rnea"] < LARGE_STATEMENTS <= min(n["rnea_derivatives"], n["aba_derivatives"])
    parts = [s for s in gen.sources["float64"] if "_parts" in s]
    assert parts == gen.large["float64"] and len(parts) >= 2
    assert all("rnea_derivatives" in s or "aba_derivatives" in s for s in parts)
    # every part is defined in exactly one part source, and only declared in the main one
    for k in ("rnea_derivatives", "aba_derivatives"):
        main = gen.files[f"rbd_iiwa14_{k}_f64.cpp"]
        for p in gen.kernels[k].parts:
            defs = [s for s in parts if f"void {p.name}(" in gen.files[s]]
            assert len(defs) == 1, p.name
            assert f"void {p.name}(" in main and main.count(p.lines[0]) == 0
    kern = rbdgen.build(m, kernels=ks)
    with open(kern.path.rsplit("/", 1)[0] + "/command.txt") as f:
        lines = f.read().splitlines()
    assert "-O3" in lines[0].split() and "-Os" not in lines[0].split()
    per_source = {k: v.split() for k, v in (ln.split(": ", 1) for ln in lines[1:])}
    looped = "rbd_iiwa14_aba_derivatives_f64.cpp"  # ∇FD's product: SLP-vectorised (cpu.NO_SLP)
    assert sorted(per_source) == sorted(parts + [looped])
    assert all("-Os" in per_source[p] and "-O3" not in per_source[p] for p in parts)
    assert "-O3" in per_source[looped] and "-fno-tree-slp-vectorize" not in per_source[looped]
    assert "-fno-tree-slp-vectorize" in lines[0].split()
    _check(kern, m, np.float64, lambda k: TOL64)
    kern2 = rbdgen.build(m, kernels=ks, opt="-O2")
    with open(kern2.path.rsplit("/", 1)[0] + "/command.txt") as f:
        lines = f.read().splitlines()
    assert "-O2" in lines[0].split() and [ln.split(": ")[0] for ln in lines[1:]] == [looped]
    assert "-Os" not in " ".join(lines)
    _check(kern2, m, np.float64, lambda k: TOL64)


def test_dense_build_agrees_with_pruned():
    m = _iiwa()
    dense = rbdgen.build(m, kernels=("rnea", "crba", "aba"), opt="-O1", fold=False)
    pruned = rbdgen.build(m, kernels=("rnea", "crba", "aba"), opt="-O1")
    q, v, a, tau = random_state(m, seed=5, n=6)
    for k in ("rnea", "crba", "aba"):
        args = kernel_args(k, q, v, a, tau)
        assert kernel_err(getattr(dense, k)(*args), getattr(pruned, k)(*args)) <= TOL64
        assert dense.op_counts[k]["mul"] > pruned.op_counts[k]["mul"]


def test_cache_hit_reuses_the_library():
    m = _iiwa()
    k1 = rbdgen.build(m, kernels=("rnea",), opt="-O1")
    k2 = rbdgen.build(m, kernels=("rnea",), opt="-O1")
    assert k1.path == k2.path


def test_out_arguments_and_shapes():
    m = _iiwa()
    kern = rbdgen.build(m, kernels=("rnea", "rnea_derivatives"), opt="-O1")
    q, v, a, _ = random_state(m, seed=6, n=3)
    out = np.empty((3, m.nv))
    r = kern.rnea(q, v, a, out=out)
    assert r is out and np.allclose(out, ref.rnea(m, q, v, a), atol=1e-9)
    dq, dv = np.empty((m.nv, m.nv)), np.empty((m.nv, m.nv))
    kern.rnea_derivatives(q[0], v[0], a[0], out=(dq, dv))
    assert kernel_err((dq, dv), ref.rnea_derivatives(m, q[0], v[0], a[0])) <= TOL64
    assert kern.rnea(q[:0], v[:0], a[:0]).shape == (0, m.nv)   # empty batch
    assert kern.rnea(list(q[0]), list(v[0]), list(a[0])).shape == (m.nv,)  # lists are converted


def test_fast_entry_point_and_python_path_agree():
    """kern.<name> is the C entry point (plain ndarrays go straight to the kernel); every other
    call is handed to the Python method kern.methods[name]. Both must give the same bits, and the
    C side must refuse nothing the Python side takes, nor take anything it refuses."""
    from rbdgen.toolchain.compiler import python_include

    m = _iiwa()
    kern = rbdgen.build(m, kernels=("rnea", "rnea_derivatives"), opt="-O1")
    if python_include() is not None:  # Python.h and NumPy's headers are installed with the venv
        assert type(kern.rnea).__name__ == "builtin_function_or_method"
        assert kern.rnea.__self__ is kern.methods["rnea"]
    py = kern.methods["rnea"]
    q, v, a, _ = random_state(m, seed=9, n=5)
    expect = ref.rnea(m, q, v, a)
    for args in [(q, v, a), (q[0], v[0], a[0])]:
        fast, slow = kern.rnea(*args), py(*args)
        assert np.array_equal(fast, slow) and np.allclose(fast, expect[: len(fast)] if fast.ndim == 2 else expect[0])
    o = np.empty((5, m.nv))
    assert kern.rnea(q, v, a, out=o) is o and np.array_equal(o, py(q, v, a))
    # not plain ndarrays: handed to the Python method, same result
    assert np.array_equal(kern.rnea(memoryview(q), v, a), py(q, v, a))
    class Sub(np.ndarray):
        pass

    assert np.array_equal(kern.rnea(q[0].view(Sub), v[0], a[0]), py(q[0], v[0], a[0]))
    ol = [np.empty((m.nv, m.nv)), np.empty((m.nv, m.nv))]
    res = kern.rnea_derivatives(q[0], v[0], a[0], out=ol)  # a list for out=: the Python path
    assert isinstance(res, tuple) and all(x is y for x, y in zip(res, ol))
    dq, dv = kern.rnea_derivatives(q, v, a)
    # (a batch's SIMD lanes take rbdgen's sine and cosine, one state libm's: equal to ~1 ulp, not in bits)
    assert dq.shape == (5, m.nv, m.nv) and np.allclose(dq[2], kern.rnea_derivatives(q[2], v[2], a[2])[0],
                                                       rtol=1e-12, atol=1e-12)
    # refusals: the same clear errors whichever side sees them first
    with pytest.raises(ValueError, match="out"):
        kern.rnea(q, v, a, out=np.empty((4, m.nv)))
    ro = np.empty((5, m.nv))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        kern.rnea(q, v, a, out=ro)
    with pytest.raises(ValueError, match="'a' has shape"):
        kern.rnea(q, v, a[:4])
    with pytest.raises(TypeError):
        kern.rnea(q, v, a, o)
    with pytest.raises(TypeError):
        kern.rnea(q, v, a, outt=o)


@pytest.mark.parametrize("bad,match", [
    (lambda q, v, a: (q[:-1], v, a), "'q' has shape"),
    (lambda q, v, a: (q.astype(np.float32), v, a), "dtype float32"),
    (lambda q, v, a: (np.asfortranarray(np.stack([q, q], axis=1).T), np.stack([v, v]), np.stack([a, a])), "C-contiguous"),
    (lambda q, v, a: (np.stack([q, q]), v, a), "'v' has shape"),
    (lambda q, v, a: (q.astype(np.int64), v, a), "dtype int64"),
    (lambda q, v, a: ("q", v, a), "numpy array"),
])
def test_bad_arguments_raise_value_error(bad, match):
    m = _iiwa()
    kern = rbdgen.build(m, kernels=("rnea",), opt="-O1")
    q, v, a, _ = random_state(m, seed=7)
    with pytest.raises(ValueError, match=match):
        kern.rnea(*bad(q, v, a))
    with pytest.raises(ValueError, match="out"):
        kern.rnea(q, v, a, out=np.empty(m.nv + 1))


def test_missing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "definitely-not-a-compiler-xyz")
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="definitely-not-a-compiler-xyz"):
        rbdgen.build(_iiwa(), kernels=("rnea",))


def test_unwritable_cache_is_a_clear_error(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(blocker / "sub"))
    with pytest.raises(rbdgen.RbdgenError, match="compile cache"):
        rbdgen.build(_iiwa(), kernels=("gravity",), opt="-O1")


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (installed on every CI machine)")
def test_build_rejects_bad_options():
    m = _iiwa()
    with pytest.raises(ValueError, match="dtype"):
        rbdgen.build(m, dtype="float16")
    with pytest.raises(ValueError, match="unknown kernel"):
        rbdgen.build(m, kernels=("rnea", "fly"))
    with pytest.raises(rbdgen.RbdgenError, match="unknown target"):
        rbdgen.build(m, target="quantum")
