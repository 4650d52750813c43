"""Shared fixtures: the robot set every test runs over, and the tolerances we hold to."""
from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import rbdgen
from rbdgen import registry
from rbdgen.errors import RbdgenWarning

# Compiled kernels are cached by content hash; keep the test cache inside the checkout (ignored
# by git) so a re-run reuses it, unless the caller chose a cache.
os.environ.setdefault("RBDGEN_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".cache" / "kernels"))

#: float64 agreement between two independent float64 computations. Both run the same
#: recursions in a different order, so they differ by round-off growing with tree depth and
#: the condition of M (aba/minv); 1e-9 leaves 4–6 orders of margin on every robot below.
TOL64 = 1e-9


#: float32 bounds per kernel: declared with the kernel (rbdgen.registry; the measurement behind
#: each number is written next to its declaration)
TOL32 = {k: registry.get(k).float32_tol for k in registry.kernels()}


def bench_module(name: str):
    """``benchmarks/<name>.py``, imported without keeping the environment defaults that
    benchmarks/measure.py sets for a benchmark run (OpenBLAS and OpenMP threads)."""
    import importlib

    saved = dict(os.environ)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)
        os.environ.clear()
        os.environ.update(saved)


def kernel_args(name, q, v, a, tau, model=None):
    """The inputs of kernel ``name``, in its declared order, from one random state (or a batch).
    Inputs beyond q, v, a, tau (the stale-data kernels' ``stale``) are drawn as the registry
    draws them, seeded, which needs ``model``."""
    env = {"q": q, "v": v, "a": a, "tau": tau}
    names = registry.get(name).input_names
    extra = [x for x in names if x not in env]
    if extra:
        if model is None:
            raise TypeError(f"kernel_args({name!r}): pass model= to draw {', '.join(extra)}")
        q2 = np.atleast_2d(np.asarray(q, dtype=float))
        env = registry.complete_inputs(model, {"q": q2}, seed=len(q2)) | env
        if np.ndim(q) == 1:
            env = {k: (x[0] if k in extra else x) for k, x in env.items()}
    return tuple(env[x] for x in names)


def ref_out(model, name, *args):
    """The NumPy reference's outputs of kernel ``name`` on its declared inputs ``args`` (one
    array, or a tuple for several outputs)."""
    exp = registry.reference(model, name, dict(zip(registry.get(name).input_names, args)))
    return exp[0] if len(exp) == 1 else exp


def kernel_err(got, exp) -> float:
    if isinstance(exp, tuple):
        return max(relerr(g, e) for g, e in zip(got, exp))
    return relerr(got, exp)


def kernel_errors(kern, model, dtype, *, seed: int, n: int, single: int) -> dict:
    """Error of every kernel of ``kern`` against the reference: on a batch of ``n`` random
    states and on state ``single`` alone (the single-state entry point); the larger of the two."""

    q, v, a, tau = random_state(model, seed=seed, n=n)
    cast = lambda x: np.ascontiguousarray(x, dtype=dtype)  # noqa: E731
    errs = {}
    for k in kern.kernels:
        args = kernel_args(k, q, v, a, tau, model)
        exp = ref_out(model, k, *args)
        f = kern.kernel(k)  # the generated kernel (not a by-name frame wrapper)
        batch = f(*map(cast, args))
        one = f(*(cast(x[single]) for x in args))
        exp1 = tuple(e[single] for e in exp) if isinstance(exp, tuple) else exp[single]
        errs[k] = max(kernel_err(batch, exp), kernel_err(one, exp1))
    return errs


def relerr(a, b) -> float:
    """max |a − b| / max(1, max |b|): the max-norm error relative to the reference's size
    (absolute for entries below 1, so values near zero do not inflate it)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


#: where the example-robot-data URDFs are when not in this Python's site-packages: a folder laid
#: out as the package's robots/ (benchmarks/gpu_check.py carries the URDFs the tests name there)
ERD_ENV = "RBDGEN_ERD_DIR"


def _erd_dir() -> Path:
    if os.environ.get(ERD_ENV):
        return Path(os.environ[ERD_ENV])
    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"


@dataclass(frozen=True)
class Robot:
    name: str
    relpath: str            # below example-robot-data's robots/ (or "bundled:<name>")
    floating: tuple = (False,)
    mimic: str = "error"
    note: str = ""

    @property
    def path(self) -> Path:
        if self.relpath.startswith("bundled:"):
            import rbdgen.robots

            return rbdgen.robots.path(self.relpath.split(":", 1)[1])
        return _erd_dir() / self.relpath

    def load(self, floating_base: bool) -> rbdgen.RobotModel:
        with warnings.catch_warnings():
            # Several real URDFs carry non-physical inertias on sensor links lumped into
            # physical bodies; the loader warns about each (tested in test_model.py).
            warnings.simplefilter("ignore", RbdgenWarning)
            return rbdgen.load_urdf(self.path, floating_base=floating_base, mimic=self.mimic)


#: The validation set of the foundation issue: arms fixed-base; legged robots and humanoids
#: fixed and floating base.
ROBOTS = [
    Robot("panda", "panda_description/urdf/panda.urdf", mimic="independent",
          note="finger joint 2 mimics finger joint 1; here loaded as an ordinary joint"),
    Robot("panda_coupled", "panda_description/urdf/panda.urdf", mimic="couple",
          note="the fingers coupled (the default): nq = nv = 8, as Pinocchio's mimic=True"),
    Robot("ur5", "ur_description/urdf/ur5_robot.urdf"),
    Robot("ur10", "ur_description/urdf/ur10_robot.urdf"),
    Robot("kinova", "kinova_description/robots/kinova.urdf", note="continuous joints"),
    Robot("double_pendulum", "double_pendulum_description/urdf/double_pendulum.urdf"),
    Robot("baxter", "baxter_description/urdf/baxter.urdf", mimic="independent",
          note="branched, dual arm; gripper fingers mimic each other"),
    Robot("tiago", "tiago_description/robots/tiago.urdf", note="branched; non-PSD antenna inertia"),
    Robot("solo12", "solo_description/robots/solo12.urdf", floating=(False, True)),
    Robot("hyq", "hyq_description/robots/hyq_no_sensors.urdf", floating=(False, True),
          note="rank-one base_link inertia"),
    Robot("anymal", "anymal_b_simple_description/robots/anymal.urdf", floating=(False, True)),
    Robot("talos_reduced", "talos_data/robots/talos_reduced.urdf", floating=(False, True)),
    Robot("g1", "g1_description/urdf/g1_29dof_rev_1_0.urdf", floating=(False, True), note="29 joints"),
    Robot("icub_reduced", "icub_description/robots/icub_reduced.urdf", floating=(False, True)),
    Robot("iiwa14", "bundled:iiwa14"),
    Robot("quadruped", "bundled:quadruped", floating=(False, True)),
]

ROBOT_CASES = [
    pytest.param(r, fb, id=f"{r.name}-{'floating' if fb else 'fixed'}") for r in ROBOTS for fb in r.floating
]


def by_robot(cases):
    """``cases`` (of ROBOT_CASES) each in the xdist group of its robot case: under `make test`
    (--dist loadgroup) the tests of one case, across the modules that use this, run in one
    worker, which then traces each kernel of the robot once (registry.trace keeps the traces of
    the models load_case keeps) instead of once per worker that meets the robot."""
    return [pytest.param(*c.values, id=c.id, marks=(*c.marks, pytest.mark.xdist_group(f"robot-{c.id}")))
            for c in cases]


_cache: dict = {}


def load_case(robot: Robot, floating: bool) -> rbdgen.RobotModel:
    key = (robot.name, floating)
    if key not in _cache:
        m = robot.load(floating)
        _cache[key] = m.with_frames(case_frames(m))
    return _cache[key]


#: kernels whose compiled builds the big matrices leave to smaller robots or to the iiwa: the
#: log-depth scans and rnea_stale's three other variants (their printer paths are rnea's and aba's;
#: test_ir.py interprets them on every robot). test_cpu_kernels.py leaves them out above nv = 20,
#: test_cuda.py out of the quadruped's build.
SCANS_AND_STALE_VARIANTS = ("rnea_scan", "aba_scan", "rnea_stale_yamakita", "rnea_stale_hamilton",
                            "rnea_stale_binder_herzog_lwp")


def case_frames(model) -> tuple:
    """The frames the tests select on a robot case: its first leaf links (feet, flanges, a
    fingertip), four at most, two on the big robots (nv > 20) to keep their builds short."""
    return tuple(model.leaf_links[: 4 if model.nv <= 20 else 2])


def random_state(model, seed: int, n: int | None = None):
    """(q, v, a, tau) at random, q within the joint limits."""
    rng = np.random.default_rng(seed)
    shape = () if n is None else (n,)
    q = model.random_q(rng, n)
    v = rng.normal(size=shape + (model.nv,))
    a = rng.normal(size=shape + (model.nv,))
    tau = rng.normal(size=shape + (model.nv,)) * 10.0
    return q, v, a, tau


# ---- CLI helpers shared by test_cli.py and test_cli_codegen.py --------------------------------

def run_main(capsys, *args):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from rbdgen.cli import main

    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_error_line(err, out, *needles):
    """A user mistake: exactly one 'error: …' line on stderr containing each needle, no traceback."""
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    for n in needles:
        assert str(n) in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


# ---- `make test-quick`: the developer loop ---------------------------------------------------
#
# `make test` takes ~32 minutes from a fresh clone on the 2-core machine (docs/performance.md
# §37, §39). `make test-quick` (pytest -m quick) runs the tests chosen here, ≤ 3 minutes with an
# empty compile cache: every kernel family on the iiwa and one floating, branched robot —
# traced and interpreted (IR), compiled (C++, float64 and float32), against the reference and
# the reference against Pinocchio — the CUDA emulation and the HLS C simulation of one small
# build each, the generated packages, and the layers' fast unit tests. A change to the model,
# the algorithms, the printer or a target breaks something here first; CI still runs everything.

#: robot cases of the quick loop: a fixed serial arm, and a floating branched tree
QUICK_CASES = {"iiwa14-fixed", "quadruped-floating"}
#: every test of these modules (robot-parametrised ones on QUICK_CASES only)
QUICK_MODULES = {
    "test_layout", "test_model", "test_registry", "test_symbolic", "test_autodiff", "test_ir", "test_cli",
    "test_reference_properties", "test_reference_vs_pinocchio", "test_reference_derivatives", "test_gencache",
    "test_generated", "test_sincos", "test_scan", "test_fuzz_loader", "test_stale", "test_contact", "test_mimic",
    "test_joint_kinds",  # spherical and planar joints: every layer on small synthetic trees, ~20 s cold
    "test_armature_fext",  # armature and the f_ext variants: IR, C++ (two small builds), Pinocchio, FD
}
#: tests of those modules that are left out all the same (seconds each, and covered by the rest)
QUICK_EXCLUDE = {"test_traced_scans_on_long_chains", "test_scan_depth_grows_like_log_n",
                 "test_the_documented_simulations_hold_their_stated_bounds", "test_cuda_emulated_coupled",
                 "test_fext_variants_on_the_cuda_and_hls_targets"}
#: these tests of the other modules (robot-parametrised ones on QUICK_CASES only)
QUICK_TESTS = {
    "test_cpu_kernels": {"test_float64_kernels_match_reference", "test_float32_kernels_match_reference",
                         "test_bad_arguments_raise_value_error", "test_out_arguments_and_shapes"},
    "test_cuda": {"test_a_build_carries_every_requested_architecture", "test_schedule_is_a_valid_parallel_order"},
    "test_hls": {"test_fixed_csim_of_one_kernel", "test_cost_counts_match_the_ir"},
    "test_stale": {"test_first_call_is_exact_and_repeated_calls_reach_a_fixed_point"},
    "test_cli_codegen": {"test_package_float64_matches_reference"},
    # names from the URDF reach generated code only through one escaping path
    "test_names": {"test_arbitrary_names_compile_and_match_reference", "test_hostile_names_generated_package"},
}
_CASE_IDS = {p.id for p in ROBOT_CASES}


def is_quick(item) -> bool:
    """Whether ``item`` runs in `make test-quick` (see above)."""
    module = Path(str(item.fspath)).stem
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    if name in QUICK_EXCLUDE:
        return False
    if module not in QUICK_MODULES and name not in QUICK_TESTS.get(module, ()):
        return False
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return True
    cases = [c for c in _CASE_IDS if c in callspec.id.split("-") or c in callspec.id]
    return not cases or any(c in QUICK_CASES for c in cases)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_quick(item):
            item.add_marker(pytest.mark.quick)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Under `make test` (--dist loadgroup) the tests marked xdist_group must reach one worker:
    pytest-xdist marks their ids with the group, which pytest 9.2 ignores (the Verilog module's
    builds then ran on both workers, and a CUDA case's two shapes waited on each other's build).
    Refused here rather than passing slower and unnoticed."""
    if not session.config.getoption("loadgroup", default=False):  # set in xdist workers only
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        msg = (f"--dist loadgroup did not group {len(lost)} tests marked xdist_group (e.g. {lost[0]}): this pytest "
               f"({pytest.__version__}) and pytest-xdist do not work together; `make venv` installs the versions "
               "pyproject.toml allows")
        sys.__stderr__.write(f"error: {msg}\n")  # a worker's exception reaches the controller as a bare crash
        sys.__stderr__.flush()
        raise pytest.UsageError(msg)
