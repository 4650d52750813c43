"""What a synthesis tool would see of the generated HLS, checked without one.

* **The synthesis path compiles.** C simulation takes the ``#else`` branch of everything that
  differs under ``__SYNTHESIS__``; this compiles every generated HLS source *with*
  ``__SYNTHESIS__`` defined, for ap_fixed<32,16> with our default modes (on a two-link chain
  whose kernels hold every operation kind the iiwa's do, and aba on the iiwa), float and double,
  against ``tests/hls_stub/hls_math.h``: a stand-in for the tool's math header declaring the
  overload set its documentation (UG1399) gives. The open-source ap_types refuse
  ``__SYNTHESIS__``, so they are included first. A negative control shows the stand-in
  reproduces the failure this check exists for (``hls::sin`` of an ap_fixed with non-default
  modes is ambiguous).
* **sin/cos are the hardware's.** The fixed-point kernels compute sine and cosine with
  rbdgen's CORDIC (rbdgen/targets/hls/cordic.py) in C simulation and hardware alike; its error is
  measured here against mpmath/NumPy, exhaustively on 16-bit formats, for every rounding mode
  family: at most one quantum with a rounding mode, 1.5 with a truncating one (the error
  budget in cordic.py).
* **A zero divisor has one defined result** in the fast C simulation, the top functions (which
  used to trap with SIGFPE) and the hardware code: the quotient saturates and the kernel's
  ``div_by_zero`` flag is set.
"""
from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import mpmath
import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import registry
from rbdgen.algorithms import KERNELS, OPT_IN
from rbdgen.targets.hls import emit as H
from rbdgen.targets.hls.csim import ap_types_dir

from conftest import ROBOT_CASES, load_case, random_state

STUB = Path(__file__).parent / "hls_stub"
FORMATS = {"fixed32_16": H.numeric_type(fixed=(32, 16)), "float": H.numeric_type("float32"),
           "double": H.numeric_type("float64")}
_gen: dict = {}


def _iiwa():
    """iiwa14 with its flange as a frame (load_case selects it): every kernel applies."""
    return load_case(*[c for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0].values)


def _generated(tmp_path_factory, fmt: str, **kw):
    """Every kernel of iiwa14 (frames and contacts included) in one format, written to a folder."""
    key = (fmt, tuple(sorted(kw.items())))
    if key not in _gen:
        gen = H.generate_hls(_iiwa(), FORMATS[fmt], **kw)
        d = tmp_path_factory.mktemp(f"syn_{fmt}")
        for fn, text in gen.files.items():
            (d / fn).write_text(text)
        _gen[key] = (gen, d)
    return _gen[key]


SYN_FLAGS = ["-std=c++14", "-Wall", "-Werror", "-Wno-unknown-pragmas"]
_pch: dict = {}


def _ap_fixed_pch(extra=()) -> Path:
    """A folder holding ``rbd_ap_fixed.h`` (``#include <ap_fixed.h>``) and g++'s precompiled form
    of it: parsing the ap_types headers is ~2.5 s of every compile below (a small kernel's takes
    ~3.5 s). g++ reads the ``.gch`` only where it was made with the same flags, and otherwise
    parses the header: a refused one costs time, never a different result."""
    key = tuple(extra)
    if key not in _pch:
        d = Path(tempfile.mkdtemp(prefix="rbdgen-pch-"))
        atexit.register(shutil.rmtree, d, True)  # ~80 MB
        (d / "rbd_ap_fixed.h").write_text("#include <ap_fixed.h>\n")
        subprocess.run(["g++", *SYN_FLAGS, "-isystem", str(ap_types_dir()), *extra, "-x", "c++-header",
                        "rbd_ap_fixed.h", "-o", "rbd_ap_fixed.h.gch"], cwd=d, capture_output=True, check=True)
        _pch[key] = d
    return _pch[key]


def _compile_synthesis(folder: Path, source, *, extra=()) -> subprocess.CompletedProcess:
    """g++ -fsyntax-only of ``source`` (a file name, or a list of them compiled as one unit) on
    the synthesis path: ap_types first (they refuse __SYNTHESIS__; precompiled,
    :func:`_ap_fixed_pch`), then __SYNTHESIS__, then the sources, whose <hls_math.h> is the
    stand-in."""
    sources = [source] if isinstance(source, str) else list(source)
    unit = folder / (f"syn_{source}" if isinstance(source, str) else "syn_all.cpp")
    unit.write_text('#include "rbd_ap_fixed.h"\n#define __SYNTHESIS__ 1\n' + "".join(f'#include "{s}"\n' for s in sources))
    cmd = ["g++", *SYN_FLAGS, "-fsyntax-only", "-isystem", str(ap_types_dir()), *extra,
           "-I", str(_ap_fixed_pch(extra)), "-I", str(STUB), unit.name]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True)


_chain2: dict = {}


def _chain2_generated(tmp_path_factory):
    """Every kernel of a two-link chain with its tip as a frame, in ap_fixed<32,16>, written to a
    folder. g++ spends 98 % of a fixed-point kernel's -fsyntax-only in ap_fixed's operator
    templates, a fixed cost per statement (the iiwa's ∇FD: 18 s alone, its 24 kernels 180 s of CI);
    the chain's kernels are a quarter of the iiwa's source. What the synthesis path changes is
    the header's helpers and each kernel's top function (its ports and pragmas), which every kernel
    has on any robot; the statements are printed one way per operation kind, and the chain's
    kernels use every kind the iiwa's do (test_the_chain_uses_every_operation_kind_the_iiwa_does)."""
    if "gen" not in _chain2:
        from rbdgen.robots import chain_urdf

        p = tmp_path_factory.mktemp("chain2") / "chain2.urdf"
        # seed 2: a chain whose kernels each hold every operation kind the iiwa's do (seed 8's world-
        # aligned frame Jacobian lost its only add when the graph began cancelling terms)
        p.write_text(chain_urdf(2, seed=2))
        m = rbdgen.load_urdf(p)
        m = m.with_frames(m.leaf_links[:1])
        gen = H.generate_hls(m, FORMATS["fixed32_16"])
        d = tmp_path_factory.mktemp("syn_chain2_fixed32_16")
        for fn, text in gen.files.items():
            (d / fn).write_text(text)
        _chain2["gen"] = (m, gen, d)
    return _chain2["gen"]


def test_the_chain_uses_every_operation_kind_the_iiwa_does(tmp_path_factory):
    """The premise of the fixed-point check below: the two-link chain's kernels, together, hold
    every operation kind the iiwa's kernels hold (the printer writes each kind one way, whatever
    the kernel), and each kernel at least the arithmetic kinds (add, sub, mul) and the iiwa's
    trigonometry and divisions."""
    m, _, _ = _chain2_generated(tmp_path_factory)
    kinds = lambda model, k: {n.op for n in registry.trace(model, k).live_nodes()}  # noqa: E731
    chain = {k: kinds(m, k) for k in KERNELS}
    iiwa = {k: kinds(_iiwa(), k) for k in KERNELS}
    assert set().union(*iiwa.values()) <= set().union(*chain.values())
    for k in KERNELS:
        assert iiwa[k] - {"neg"} <= chain[k], (k, iiwa[k] - chain[k])


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("fmt", ["float", "double"])
def test_synthesis_path_compiles(fmt, kernel, tmp_path_factory):
    gen, d = _generated(tmp_path_factory, fmt)
    src = f"{gen.prefix}_{kernel}.cpp"
    assert src in gen.sources
    r = _compile_synthesis(d, src)
    assert r.returncode == 0, f"{fmt} {kernel} does not compile with __SYNTHESIS__:\n{r.stderr[-3000:]}"


def test_synthesis_path_compiles_every_fixed_point_kernel(tmp_path_factory):
    """ap_fixed<32,16>: every kernel of the two-link chain (_chain2_generated: why a chain), in one
    translation unit (the header's synthesis path alone is 1.5 s of ap_fixed templates per unit:
    the 24 kernels 27 s together, 75 s apart), and aba on the iiwa (divisions, trigonometry, the
    recursions of a real arm). g++ names the kernel's source in any error."""
    _, gen, d = _chain2_generated(tmp_path_factory)
    assert {f"{gen.prefix}_{k}.cpp" for k in KERNELS} == set(gen.sources)
    r = _compile_synthesis(d, gen.sources)
    assert r.returncode == 0, f"the chain's kernels do not compile with __SYNTHESIS__:\n{r.stderr[-3000:]}"
    gen, d = _generated(tmp_path_factory, "fixed32_16", kernels=("aba",))
    r = _compile_synthesis(d, f"{gen.prefix}_aba.cpp")
    assert r.returncode == 0, f"the iiwa's aba does not compile with __SYNTHESIS__:\n{r.stderr[-3000:]}"


_opt_in: dict = {}


def _opt_in_model(tmp_path_factory):
    """A three-link chain, its tip welded (a 6-D contact): the opt-in kernels' code has the same
    statements on it as on the iiwa (every operation kind, checked below), in 357 KB of source
    where the iiwa's constrained_fd_schur is 915 KB (26 000 lines of ap_fixed, 66 s of
    -fsyntax-only on CI)."""
    from rbdgen.robots import chain_urdf

    if "model" not in _opt_in:
        p = tmp_path_factory.mktemp("chain3") / "chain3.urdf"
        p.write_text(chain_urdf(3, seed=3))
        m = rbdgen.load_urdf(p)
        m = m.with_frames(m.leaf_links[:1])
        _opt_in["model"] = m.with_constraints([rbdgen.Contact(m.frames[0], "6d")])
    return _opt_in["model"]


def _opt_in_generated(tmp_path_factory, fmt):
    """The opt-in kernels' sources (generated once per format and worker)."""
    if fmt not in _opt_in:
        m = _opt_in_model(tmp_path_factory)
        gen = H.generate_hls(m, FORMATS[fmt], kernels=OPT_IN_SYNTHESIS)
        d = tmp_path_factory.mktemp(f"opt_in_{fmt}")
        for fn, text in gen.files.items():
            (d / fn).write_text(text)
        _opt_in[fmt] = (gen, d)
    return _opt_in[fmt]


#: the opt-in kernels compiled on the synthesis path: Fijany's Λ⁻¹ on a frame and the constrained
#: forward dynamics (every operation the four use — fd_schur and minv_schur are the same
#: recursions and operations, and take a minute each here; their C simulation is test_schur.py's)
OPT_IN_SYNTHESIS = ("osim_inverse_schur", "constrained_fd_schur")


@pytest.mark.parametrize("kernel", OPT_IN_SYNTHESIS)
@pytest.mark.parametrize("fmt", ["fixed32_16"])
def test_synthesis_path_compiles_the_opt_in_kernels(fmt, kernel, tmp_path_factory):
    """Fijany's Schur-complement kernels (built only when named: not in KERNELS above), the
    constrained one with the tip welded, on a three-link chain whose kernel uses every kind of
    operation the iiwa's does (with its flange welded). ap_fixed only (where the math header's
    overloads bite; float and double take the same code paths as every kernel above). One test
    per kernel, so that the workers share them out."""
    assert set(OPT_IN_SYNTHESIS) <= set(OPT_IN)
    iiwa = _iiwa().with_constraints([rbdgen.Contact(_iiwa().frames[0], "6d")])
    kinds = lambda m: {n.op for n in registry.trace(m, kernel).live_nodes()}  # noqa: E731
    assert kinds(iiwa) <= kinds(_opt_in_model(tmp_path_factory)), kernel
    gen, d = _opt_in_generated(tmp_path_factory, fmt)
    r = _compile_synthesis(d, f"{gen.prefix}_{kernel}.cpp")
    assert r.returncode == 0, f"{fmt} {kernel} does not compile with __SYNTHESIS__:\n{r.stderr[-3000:]}"


@pytest.mark.parametrize("interface,ii", [("s_axilite", None), ("m_axi", 21)])
def test_synthesis_path_compiles_other_interfaces(interface, ii, tmp_path_factory):
    """The AXI variants copy ports into local arrays: other code on the synthesis path."""
    gen, d = _generated(tmp_path_factory, "fixed32_16", kernels=("gravity", "aba"), interface=interface, ii=ii)
    for src in gen.sources:
        r = _compile_synthesis(d, src)
        assert r.returncode == 0, f"{interface}: {src}:\n{r.stderr[-3000:]}"


@pytest.mark.parametrize("fmt, ii", [("fixed32_16", None), ("float", None), ("fixed32_16", 2)])
def test_synthesis_path_compiles_rolled_kernels(fmt, ii, tmp_path_factory):
    """The rolled lowering (--unroll no): its kinds' functions with their ROM tables, the runs'
    loops, the sines and cosines by one rbd_sincos in a loop, the gathered outputs and the dense
    products' mirrors: ∇FD holds every one of these, forward kinematics the rest; with --ii the
    pipelined modules and loops."""
    gen, d = _generated(tmp_path_factory, fmt, kernels=("forward_kinematics", "aba_derivatives"), unroll=False, ii=ii)
    for src in gen.sources:
        assert "#pragma HLS INLINE off" in gen.files[src], src
        r = _compile_synthesis(d, src)
        assert r.returncode == 0, f"{fmt} rolled {src} does not compile with __SYNTHESIS__:\n{r.stderr[-3000:]}"


def test_ii_below_the_port_limit_warns(tmp_path, capsys):
    """One word per cycle through an AXI port: aba's 21 input words on one m_axi master allow
    II ≥ 21, ∇FD's 49-word outputs on s_axilite II ≥ 49; ap_memory ports any II."""
    from rbdgen.errors import RbdgenWarning
    from conftest import run_main

    m = _iiwa()
    nt = FORMATS["fixed32_16"]
    assert H.port_limited_ii([7, 7, 7], [7], "m_axi") == 21 and H.port_limited_ii([7, 7, 7], [49, 49], "s_axilite") == 49
    with pytest.warns(RbdgenWarning, match=r"--ii 20: the m_axi ports of aba .* every 21 cycles"):
        H.generate_hls(m, nt, ("aba",), ii=20, interface="m_axi")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H.generate_hls(m, nt, ("aba",), ii=21, interface="m_axi")
        H.generate_hls(m, nt, ("aba",), ii=1, interface="ap_memory")
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--target", "hls", "--fixed", "32,16",
                            "--kernels", "aba_derivatives", "--ii", "8", "--interface", "s_axilite", "--out", tmp_path, "-q")
    assert rc == 0 and re.search(r"^warning: --ii 8: the s_axilite ports of aba_derivatives .* every 49 cycles", err, re.M), err


def test_stand_in_reproduces_the_ambiguity(tmp_path):
    """The negative control: against the stand-in, what the HLS kernels used to do (hls::sin of
    our ap_fixed<32,16,AP_RND_CONV,AP_SAT>) fails as in the tool, while the documented use
    (default modes, floating point) compiles, so the check above can fail."""
    def attempt(body):
        (tmp_path / "t.cpp").write_text("#include <ap_fixed.h>\n#define __SYNTHESIS__ 1\n#include <hls_math.h>\n" + body)
        return subprocess.run(["g++", "-std=c++14", "-fsyntax-only", "-isystem", str(ap_types_dir()), "-I", str(STUB),
                               "t.cpp"], cwd=tmp_path, capture_output=True, text=True)

    bad = attempt("typedef ap_fixed<32, 16, AP_RND_CONV, AP_SAT> T;\nT f(T x) { return hls::sin(x); }\n")
    assert bad.returncode != 0 and "ambiguous" in bad.stderr, bad.stderr
    ok = attempt("ap_fixed<18, 4> f(ap_fixed<32, 16> x) { return hls::sin(x); }\n"
                 "void g(double x, double* s, double* c) { hls::sincos(x, s, c); }\n"
                 "float h(float x) { return hls::cos(x); }\n")
    assert ok.returncode == 0, ok.stderr


def test_generated_sources_use_no_math_library_for_fixed_point():
    """ap_fixed kernels call no hls:: function at all (the CORDIC is generated code), so their
    C simulation is the hardware's arithmetic; float/double call hls::sincos when synthesizing."""
    m = _iiwa()
    fx = H.generate_hls(m, FORMATS["fixed32_16"], ("rnea",))
    header = fx.files[fx.header]
    used = set(re.findall(r"hls::(\w+)", header))
    assert used == {"sincos"}  # only inside the float/double overloads
    fixed_part = header[header.index("sin and cos of x by CORDIC"):header.index("rbd_div(a, b, dz)")]
    assert "hls::" not in fixed_part and "std::" not in fixed_part
    assert "rbd_sincos(" in fx.files[fx.sources[0]]


# ---- the CORDIC ------------------------------------------------------------------------------

_sincos_kern: dict = {}


def _sincos(W, I, rounding="AP_RND_CONV", overflow="AP_SAT"):  # noqa: E741
    """The generated CORDIC of ap_fixed<W, I, rounding, overflow>, called through the C-simulation
    harness of a one-joint robot's smallest kernel."""
    key = (W, I, rounding, overflow)
    if key not in _sincos_kern:
        from rbdgen.robots import chain_urdf

        path = Path(tempfile.mkdtemp()) / "chain1.urdf"
        path.write_text(chain_urdf(1, seed=1))
        m = rbdgen.load_urdf(path)
        _sincos_kern[key] = rbdgen.build(m, target="hls", fixed=(W, I), rounding=rounding, overflow=overflow,
                                         kernels=("gravity",), opt="-O1")
    return _sincos_kern[key].sincos


def _raw_grid(W, I, n_random=4000, seed=0):  # noqa: E741
    """Raw integers: every value of a 16-bit format; otherwise the extremes, small angles and
    random values over the whole range."""
    if W <= 16:
        return np.arange(-(2 ** (W - 1)), 2 ** (W - 1), dtype=np.int64)
    rng = np.random.default_rng(seed)
    lim = 2 ** (W - 1)
    small = min(lim - 1, 2 ** (W - I + 3))
    return np.unique(np.concatenate([
        [-lim, -lim + 1, -1, 0, 1, lim - 1],
        rng.integers(-lim, lim - 1, size=n_random, dtype=np.int64, endpoint=True),
        rng.integers(-small, small, size=n_random, dtype=np.int64),
    ]))


def _quanta_error(W, I, raws, s, c):  # noqa: E741
    """max |error| of sin and cos in quanta 2^-F, against mpmath (exact) for F > 40, else NumPy
    (its ~1e-16 error is nothing against a quantum of 2^-40 or more)."""
    F = W - I
    if F > 40:
        worst = 0.0
        with mpmath.workprec(160):
            for r, sv, cv in zip(raws, s, c):
                x = mpmath.mpf(int(r)) / mpmath.mpf(2) ** F
                es = abs(mpmath.mpf(sv) - mpmath.sin(x)) * mpmath.mpf(2) ** F
                ec = abs(mpmath.mpf(cv) - mpmath.cos(x)) * mpmath.mpf(2) ** F
                worst = max(worst, float(es), float(ec))
        return worst
    x = raws.astype(np.float64) * 2.0 ** -F  # exact: |raws| < 2^53 here
    return float(max(np.max(np.abs(s - np.sin(x))), np.max(np.abs(c - np.cos(x)))) * 2.0 ** F)


@pytest.mark.parametrize("W,I,rounding,bound", [
    (16, 4, "AP_RND_CONV", 1.0), (16, 8, "AP_RND_CONV", 1.0), (16, 3, "AP_TRN", 1.5), (16, 1, "AP_RND", 1.0),
    (24, 10, "AP_TRN_ZERO", 1.5), (32, 16, "AP_RND_CONV", 1.0), (32, 4, "AP_RND_INF", 1.0),
    (48, 24, "AP_RND_CONV", 1.0), (64, 32, "AP_RND_CONV", 1.0), (64, 12, "AP_TRN", 1.5),
])
def test_cordic_error_within_budget(W, I, rounding, bound):  # noqa: E741
    # results come back as doubles: up to F = 52 fractional bits they are exact (hence <64,12>)
    raws = _raw_grid(W, I, n_random=600 if W - I > 40 else 4000)
    x = raws.astype(np.float64) * 2.0 ** -(W - I)
    if W > 53:  # a double carries the raw values below 2^53 exactly: those are measured
        keep = np.abs(raws) < 2 ** 53
        raws, x = raws[keep], x[keep]
    s, c = _sincos(W, I, rounding)(x)
    err = _quanta_error(W, I, raws, s, c)
    assert err <= bound, f"ap_fixed<{W},{I},{rounding}>: sin/cos error {err:.3f} quanta > {bound}"
    assert err > 0.25  # it is a quantised result, not a double computation in disguise


def test_cordic_at_the_top_of_the_range_and_overflow_modes():
    """|x| at the format's limit (k up to 2^(I−1)·2/π) is reduced exactly; with I = 1, 1.0 does
    not exist and cos(0) saturates or wraps as the format says."""
    s, c = _sincos(32, 24)(np.array([2.0 ** 23 - 2.0 ** -8, -(2.0 ** 23), 1e6 + 0.125]))
    with mpmath.workprec(200):
        for xv, sv, cv in zip([2.0 ** 23 - 2.0 ** -8, -(2.0 ** 23), 1e6 + 0.125], s, c):
            assert abs(sv - float(mpmath.sin(xv))) <= 2.0 ** -8 and abs(cv - float(mpmath.cos(xv))) <= 2.0 ** -8
    _, c_sat = _sincos(16, 1, "AP_RND", "AP_SAT")(np.array([0.0]))
    _, c_wrap = _sincos(16, 1, "AP_RND", "AP_WRAP")(np.array([0.0]))
    assert c_sat[0] == 1.0 - 2.0 ** -15 and c_wrap[0] == -1.0


def test_cordic_parameters_follow_the_error_budget():
    from rbdgen.targets.hls.cordic import cordic

    for W, I in ((16, 4), (32, 16), (64, 8)):  # noqa: E741
        c = cordic(W, I)
        F = W - I
        assert c.N == F + 3 and 1.65 * c.N * 2.0 ** -c.FI <= 2.0 ** -(F + 2)
        assert abs(c.C2PI / 2 ** c.M - 2 / np.pi) < 2.0 ** -c.M
        with mpmath.workprec(300):
            assert abs(mpmath.mpf(c.PIO2) / mpmath.mpf(2) ** (c.FI + c.L) - mpmath.pi / 2) <= mpmath.mpf(2) ** -(c.FI + c.L)
            assert all(abs(mpmath.mpf(a) / mpmath.mpf(2) ** c.FI - mpmath.atan(mpmath.mpf(2) ** -i))
                       <= mpmath.mpf(2) ** -c.FI for i, a in enumerate(c.atan))


# ---- division by zero --------------------------------------------------------------------------

def test_zero_divisor_is_defined_in_both_c_simulations_and_flagged(tmp_path):
    """ap_fixed<16,12> quantises the wrist's articulated inertias to 0: the top functions, which
    trapped (SIGFPE), now saturate exactly like the fast C simulation, and both report the
    states; the generated testbench reports them per kernel."""
    m = _iiwa()
    q = random_state(m, seed=1, n=6)[0]
    fast = rbdgen.build(m, target="hls", fixed=(16, 12), kernels=("minv",), csim="fast", opt="-O0")
    top = rbdgen.build(m, target="hls", fixed=(16, 12), kernels=("minv",), csim="top", opt="-O0")
    fast.div_by_zero(), top.div_by_zero()
    a, b = fast.minv(q), top.minv(q)
    assert np.array_equal(a, b)
    assert fast.div_by_zero() == top.div_by_zero() == len(q)  # the wrist's inertia is 0 in every state
    assert np.max(np.abs(a)) >= 2.0 ** 11 - 2.0 ** -4  # saturated: the format's extreme
    # the testbench of that format reports it
    gen = H.generate_hls(m, H.numeric_type(fixed=(16, 12)), ("minv",))
    for fn, text in gen.files.items():
        (tmp_path / fn).write_text(text)
    exe = tmp_path / "tb"
    r = subprocess.run(["g++", "-std=c++14", "-O0", "-isystem", str(ap_types_dir()), gen.testbench, *gen.sources,
                        "-o", str(exe)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    out = subprocess.run([str(exe), "1e9"], capture_output=True, text=True).stdout
    assert re.search(r"minv .*\[zero divisor in [1-4] state\(s\)\]", out), out


def test_testbench_tolerances_are_twice_the_measured_bounds():
    m = _iiwa()
    for fmt, nt in (((32, 16), H.numeric_type(fixed=(32, 16))), ((48, 24), H.numeric_type(fixed=(48, 24)))):
        tb = H.generate_hls(m, nt, ("rnea", "aba_derivatives")).files["rbd_iiwa14_tb.cpp"]
        for k in ("rnea", "aba_derivatives"):
            tol = float(re.search(rf"#if !defined\(RBD_TB_ONLY\) \|\| defined\(RBD_TB_{k}\)\n.*?: ([0-9.e+-]+);", tb,
                                  re.S).group(1))
            assert tol == pytest.approx(2 * registry.get(k).fixed_tol[fmt]), (fmt, k)
    tb = H.generate_hls(m, H.numeric_type("float32"), ("aba",)).files["rbd_iiwa14_tb.cpp"]
    assert f": {2 * registry.get('aba').float32_tol!r};" in tb
