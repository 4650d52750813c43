#!/usr/bin/env python3
"""MuJoCo models in the benchmark (issue 43): the dm_control humanoid and dog, read from their MJCF
files, built by rbdgen and timed one state at a time against Pinocchio's C++ on the same tree.

    python benchmarks/mjcf.py            # `make bench-mjcf`: writes benchmarks/results/mjcf.{json,md}
    python benchmarks/mjcf.py --quick    # a smoke run

For each model: the load time, the cold-cache build time of the dynamics kernels (rbdgen.build in
an empty compile cache, generation included), and ns per single-state call from C++ (the driver of
benchmarks/measure.py) beside Pinocchio's (benchmarks/pinocchio_bench.cpp, the harness `make
bench` uses, on the same machine in the same run).

Pinocchio runs the model rbdgen read, written out joint by joint (the harness's --model file):
the same tree, placements, inertias and armature. Pinocchio's own MJCF parser makes a composite
joint of a body with several joints and reads some inertias differently (docs/mjcf.md); the
chain of one-DoF joints is the same dynamics and the form Pinocchio is fastest on, so the ratio is
not flattered by it. Agreement is checked in the same run: rbdgen's compiled kernels against
Pinocchio's Python bindings on that same model (rnea, crba, aba, minv at 8 states, ≤ 1e-9).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import measure  # first: thread settings before NumPy (see measure.py)
from measure import HERE, best_round, log, machine_info, run_driver, single_state_driver

import numpy as np

import rbdgen
from rbdgen import spatial as sp
from rbdgen.toolchain.compiler import CACHE_ENV, find_cxx
from rbdgen.validate import _x_pose

from peers import build_pinocchio_harness, ensure_pinocchio_headers, run_pinocchio

sys.path.insert(0, str(HERE.parent / "tests"))
import mjcf_corpus  # noqa: E402  (the corpus: `make mjcf-corpus`)

#: the issue's two: a 27-DoF humanoid (floating) and the 79-DoF dog (floating; 162 STL bones)
CASES = {"humanoid": "humanoid", "dog": "dog"}
#: what is built and timed: the dynamics kernels every user needs (the build time is theirs)
KERNELS = ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")


def pin_type(model, i) -> tuple[str, np.ndarray]:
    t, ax = model.joint_types[i], np.asarray(model.axis[i], dtype=float)
    if t == "floating":
        return "JointModelFreeFlyer", np.zeros(3)
    base = {"revolute": "R", "prismatic": "P"}.get(t)
    if base is None:
        raise SystemExit(f"{model.name}: joint {model.joint_names[i]} is {t}: not in the harness's model file format")
    for k, c in enumerate("XYZ"):
        e = np.zeros(3)
        e[k] = 1.0
        if np.array_equal(ax, e):
            return f"JointModel{base}{c}", ax
    return ("JointModelRevoluteUnaligned" if base == "R" else "JointModelPrismaticUnaligned"), ax


def model_file(model, path: Path) -> None:
    """``model`` as pinocchio_bench.cpp's --model file (one joint per body, parents first)."""
    f = lambda xs: " ".join(repr(float(x)) for x in np.ravel(xs))  # noqa: E731
    lines = []
    for i in range(model.nb):
        kind, ax = pin_type(model, i)
        R, p = _x_pose(model.X_tree[i])
        m, c, Ic = sp.inertia_parts(model.inertia[i])
        Ic = 0.5 * (Ic + Ic.T)
        lines.append(" ".join(["joint", str(model.parent[i] + 1), kind, f(ax), f(R), f(p), repr(float(m)), f(c),
                               f([Ic[0, 0], Ic[0, 1], Ic[0, 2], Ic[1, 1], Ic[1, 2], Ic[2, 2]]), f"j{i}"]))
    lo, hi = pin_limits(model)
    arm = model.armature if model.armature is not None else np.zeros(model.nv)
    lines += ["lower " + f(lo), "upper " + f(hi), "armature " + f(arm)]
    path.write_text("\n".join(lines) + "\n")


def pin_limits(model):
    """Finite position limits for Pinocchio's randomConfiguration (the hinge ranges, else ±π)."""
    lo, hi = np.full(model.nq, -1.0), np.full(model.nq, 1.0)
    for i, t in enumerate(model.joint_types):
        s = model.q_start[i]
        if t in ("revolute", "prismatic"):
            a, b = model.lower[i], model.upper[i]
            lo[s], hi[s] = (a, b) if np.isfinite(a) and np.isfinite(b) else (-np.pi, np.pi)
    return lo, hi


def pin_model(pin, model):
    """The same tree as a pinocchio.Model in Python (the agreement check)."""
    pm = pin.Model()
    for i in range(model.nb):
        kind, ax = pin_type(model, i)
        jm = getattr(pin, kind)(ax) if kind.endswith("Unaligned") else getattr(pin, kind)()
        R, p = _x_pose(model.X_tree[i])
        j = pm.addJoint(model.parent[i] + 1, jm, pin.SE3(R, p), f"j{i}")
        m, c, Ic = sp.inertia_parts(model.inertia[i])
        pm.appendBodyToJoint(j, pin.Inertia(float(m), np.array(c), 0.5 * (Ic + Ic.T)), pin.SE3.Identity())
    pm.gravity.linear = np.asarray(model.gravity, dtype=float)
    if model.armature is not None:
        pm.armature = np.asarray(model.armature, dtype=float)
    return pm


def agreement(model, kern, rng) -> dict:
    import pinocchio as pin

    pm = pin_model(pin, model)
    data = pm.createData()
    err = {k: 0.0 for k in ("rnea", "crba", "aba", "minv")}

    def rel(a, b):
        return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))

    for _ in range(8):
        q = model.random_q(rng)
        v, a, tau = (rng.uniform(-1, 1, model.nv) for _ in range(3))
        qp = model.to_pinocchio_q(q)
        err["rnea"] = max(err["rnea"], rel(kern.rnea(q, v, a), pin.rnea(pm, data, qp, v, a)))
        M = pin.crba(pm, data, qp)
        M = np.triu(M) + np.triu(M, 1).T
        err["crba"] = max(err["crba"], rel(kern.crba(q), M))
        err["aba"] = max(err["aba"], rel(kern.aba(q, v, tau), pin.aba(pm, data, qp, v, tau)))
        Mi = pin.computeMinverse(pm, data, qp)
        Mi = np.triu(Mi) + np.triu(Mi, 1).T
        err["minv"] = max(err["minv"], rel(kern.minv(q), Mi))
    return err


def bench_case(name: str, cxx: str, pin_exe: str, quick: bool) -> dict:
    path = mjcf_corpus.path(CASES[name])
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one note on actuators, tendons
        model = rbdgen.load_mjcf(path)
    load_s = time.perf_counter() - t
    res = {"file": str(path.relative_to(mjcf_corpus.ROOT)), "nq": model.nq, "nv": model.nv, "nb": model.nb,
           "floating_base": model.floating_base, "load_s": round(load_s, 3), "kernels": list(KERNELS)}
    log(f"== {name}: {res['file']} nq={model.nq} nv={model.nv} nb={model.nb}, loaded in {load_s:.2f} s")
    work = Path(tempfile.mkdtemp(prefix=f"rbdgen-bench-mjcf-{name}-"))
    old = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(work / "cache")  # empty: a cold build, as a user's first
    try:
        rng = np.random.default_rng(7)
        log(f"{name}: rbdgen.build of {', '.join(KERNELS)} (cold cache) …")
        kern, drv, pool_file, build_s = single_state_driver(cxx, model, list(KERNELS), rng, work)
    finally:
        if old is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = old
    res["build_s"] = round(build_s, 1)
    res["library_bytes"] = Path(kern.path).stat().st_size
    log(f"{name}: built in {build_s:.1f} s ({res['library_bytes'] / 1e6:.1f} MB library)")
    res["agreement_vs_pinocchio"] = agreement(model, kern, np.random.default_rng(3))
    log(f"{name}: agreement with Pinocchio " + ", ".join(f"{k} {e:.1e}" for k, e in res["agreement_vs_pinocchio"].items()))
    mfile = work / "model.txt"
    model_file(model, mfile)
    rounds_r, rounds_p = [], []
    for r in range(2 if quick else 3):  # alternate the two, so that both see the same machine
        rounds_r.append(run_driver(drv, pool_file, quick))
        rounds_p.append(run_pinocchio(pin_exe, mfile, model.floating_base, quick, mfile)["ns_per_call"])
    ours, theirs = best_round(rounds_r), best_round([{k: p[k] for k in KERNELS if k in p} for p in rounds_p])
    res["rbdgen_ns"] = {k: round(ours[k]["median"], 1) for k in KERNELS}
    res["pinocchio_ns"] = {k: round(theirs[k]["median"], 1) for k in KERNELS if k in theirs}
    res["ratio"] = {k: round(res["pinocchio_ns"][k] / res["rbdgen_ns"][k], 2) for k in res["pinocchio_ns"]}
    log(f"{name}: " + ", ".join(f"{k} {res['ratio'].get(k, '-')}×" for k in KERNELS))
    return res


def markdown(out: dict) -> str:
    m = out["machine"]
    lines = ["# MuJoCo models: rbdgen vs Pinocchio (C++), one state", "",
             f"Generated by `benchmarks/mjcf.py` (`make bench-mjcf`) on {out['date']}: {m.get('cpu', '?')}, "
             f"{m.get('cpus_available', '?')} CPUs available, SIMD {' '.join(m.get('cpu_simd_flags') or ['?'])}, "
             f"{str(m.get('compiler', '?')).splitlines()[0]}; Pinocchio {out['pinocchio']}, built with -march=native "
             "as rbdgen's kernels (`make bench`'s native harness). "
             "ns per call, median of the best of alternating rounds (see benchmarks/README.md for the method). "
             "Pinocchio runs the same tree rbdgen read (one-DoF joints; its MJCF parser would make composite joints). "
             "The build is `rbdgen.build` of the six kernels below in an empty compile cache, generation included.", ""]
    lines += ["| model | nq | nv | load | build | kernel | rbdgen ns | Pinocchio ns | ratio | max rel. diff vs Pinocchio |",
              "|---|---|---|---|---|---|---:|---:|---:|---:|"]
    for name, r in out["models"].items():
        for j, k in enumerate(KERNELS):
            head = f"| {name} | {r['nq']} | {r['nv']} | {r['load_s']} s | {r['build_s']} s " if j == 0 else "| | | | | "
            agree = r["agreement_vs_pinocchio"].get(k)
            lines.append(head + f"| {k} | {r['rbdgen_ns'][k]:.0f} | {r['pinocchio_ns'].get(k, float('nan')):.0f} | "
                         f"{r['ratio'].get(k, float('nan')):.2f}× | {'' if agree is None else f'{agree:.1e}'} |")
    lines += ["", "Load average (1, 5, 15 min) at the start of each model: "
              + ", ".join(f"{n} {r.get('load_average_at_start')}" for n, r in out["models"].items())
              + ". On this 2-CPU machine a load above 2 means other work shared the cores: the build times are "
              "then longer than on a quiet machine; the ratios come from rounds that alternate rbdgen and Pinocchio.",
              ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    ap.add_argument("--models", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for mjcf.json and mjcf.md")
    ap.add_argument("--report-only", metavar="JSON", help="rewrite mjcf.md from an earlier mjcf.json")
    args = ap.parse_args(argv)
    if args.report_only:
        out = json.loads(Path(args.report_only).read_text())
        (Path(args.out) / "mjcf.md").write_text(markdown(out))
        return 0
    if not mjcf_corpus.available():
        print(f"the MJCF corpus is missing ({mjcf_corpus.ROOT}): run `make mjcf-corpus`", file=sys.stderr)
        return 2
    cxx = find_cxx()
    ensure_pinocchio_headers()
    # rbdgen builds for this machine (-march=native): so does the Pinocchio it is compared with
    # (`make bench`'s "native" harness; compiled once, ~6 min, then cached)
    pin_exe = build_pinocchio_harness(cxx, "native")["binary"]
    import pinocchio

    out = {"date": time.strftime("%Y-%m-%d"), "machine": machine_info(cxx), "pinocchio": pinocchio.__version__,
           "models": {}}
    for name in args.models.split(","):
        load = measure.loadavg()
        out["models"][name] = bench_case(name, cxx, pin_exe, args.quick)
        out["models"][name]["load_average_at_start"] = load
    dest = Path(args.out)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "mjcf.json").write_text(json.dumps(out, indent=1) + "\n")
    (dest / "mjcf.md").write_text(markdown(out))
    log(f"wrote {dest / 'mjcf.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
