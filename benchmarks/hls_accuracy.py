#!/usr/bin/env python3
"""Fixed-point accuracy sweep of the HLS kernels (what `make bench-hls` runs; not a test).

    python benchmarks/hls_accuracy.py                       # iiwa14 + quadruped, the full grid
    python benchmarks/hls_accuracy.py --quick               # 2 robots, 3 formats, few states

For each robot and each ap_fixed<W, I> format (W from 16 to 48, several I; rounding AP_RND_CONV,
overflow AP_SAT: the generator's defaults), every kernel is generated for that format, compiled
once for C simulation (g++ against the ap_types headers, exactly what `rbdgen.build(model,
target="hls", fixed=(W, I))` runs) and evaluated on the same random states within the joint
limits (seeded; inputs quantised too). The error of a state is the max-norm relative error
used throughout rbdgen's tests, max|x − y| / max(1, max|y|) against the float64 NumPy
reference, taken per output array and maximised over the arrays of the kernel. Reported: max
and median over the states, per kernel, plus double and float datapaths for comparison, and
which formats keep ∇FD (aba_derivatives) within 1e-2 and 1e-3.

Writes benchmarks/results/hls_accuracy.json (every number, machine, git revision, timings),
hls_accuracy.md (tables) and hls_accuracy.png (when matplotlib is importable; `make bench-hls`
installs it).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import rbdgen
import rbdgen.robots
from rbdgen import registry
from rbdgen.toolchain.compiler import CACHE_ENV

# every declared kernel but constrained_fd, whose contacts are chosen per robot, and the opt-in
# Schur-complement kernels, which refuse the quadruped (their fixed-point bounds were measured on
# their own: rbdgen/algorithms/constrained.py, rbdgen/algorithms/schur.py)
KERNELS = tuple(k for k in registry.kernels() if not registry.get(k).constraints and not registry.get(k).opt_in)

HERE = Path(__file__).resolve().parent
ROBOTS = {
    "iiwa14": ("iiwa14", False, "KUKA iiwa 14 (bundled), fixed base, nv = 7"),
    "quadruped": ("quadruped", True, "12-joint quadruped (bundled), floating base, nv = 18"),
}
WIDTHS = (16, 20, 24, 28, 32, 40, 48)
INTS = (8, 12, 16, 20)
THRESHOLDS = (1e-2, 1e-3)
FD = "aba_derivatives"


def relerr(x, y) -> float:
    return float(np.max(np.abs(x - y)) / max(1.0, float(np.max(np.abs(y)))))


def states(model, n, seed):
    rng = np.random.default_rng(seed)
    q = model.random_q(rng, n)
    return registry.complete_inputs(model, {"q": q, "v": rng.normal(size=(n, model.nv)), "a": rng.normal(size=(n, model.nv)),
                                            "tau": 10.0 * rng.normal(size=(n, model.nv))}, seed=seed)


def per_state_errors(kern, model, env, expected):
    out = {}
    n = env["q"].shape[0]
    for k in KERNELS:
        args = [env[a] for a in registry.get(k).input_names]
        kern.div_by_zero()
        got = kern.kernel(k)(*args)
        div0 = kern.div_by_zero()
        exp = expected[k]
        got = got if isinstance(got, tuple) else (got,)
        exp = exp if isinstance(exp, tuple) else (exp,)
        errs = np.array([max(relerr(g[i], e[i]) for g, e in zip(got, exp)) for i in range(n)])
        errs[~np.isfinite(errs)] = np.inf
        out[k] = {"max": float(np.max(errs)), "median": float(np.median(errs)),
                  "p95": float(np.quantile(errs, 0.95)), "div_by_zero": div0}
    return out


def git_revision() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=HERE, capture_output=True, text=True).stdout
        return r.stdout.strip() + ("+dirty" if dirty.strip() else "")
    except OSError:
        return "unknown"


def fmt_err(x: float) -> str:
    return "inf" if not np.isfinite(x) else f"{x:.1e}"


def markdown(res: dict) -> str:
    L = ["# HLS fixed-point accuracy sweep", "",
         f"`make bench-hls` (benchmarks/hls_accuracy.py), rbdgen {res['rbdgen']}, git {res['git']}, "
         f"{res['date']}, {res['machine']}, {res['compiler']}; {res['wall_s'] / 60:.1f} min.", "",
         "Error of a state: max|x − y| / max(1, max|y|) against the float64 NumPy reference, per output "
         "array, max over the kernel's arrays; inputs quantised to the format too. Cells: **max / median** "
         f"over the states. ap_fixed<W, I>: W bits, I integer bits (sign included), {res['rounding']}, "
         f"{res['overflow']}. Sine and cosine are the generated CORDIC, as in hardware (since issue 18; "
         "before, C simulation rounded std::sin once, an ideal operator). Method and caveats: docs/hls.md.", ""]
    for rname, r in res["robots"].items():
        L += [f"## {rname}: {r['description']}", "",
              f"{r['states']} random states (seed {r['seed']}) within the joint limits.", ""]
        L.append("| format | " + " | ".join(KERNELS) + " |")
        L.append("|---|" + "---:|" * len(KERNELS))
        for row in r["formats"]:
            cells = [f"{fmt_err(row['errors'][k]['max'])} / {fmt_err(row['errors'][k]['median'])}"
                     + (" †" if row["errors"][k]["div_by_zero"] else "") for k in KERNELS]
            L.append(f"| {row['label']} | " + " | ".join(cells) + " |")
        L.append("")
        L.append("† some divisor (an articulated inertia D_i) quantised to zero on some states; such quotients "
                 "saturate to the format's extreme and the kernel's div_by_zero flag is set (rbd_div: the same in C "
                 "simulation and hardware).")
        L.append("")
        for t in THRESHOLDS:
            ok_max = [row["label"] for row in r["formats"] if row["fixed"] and row["errors"][FD]["max"] <= t]
            ok_med = [row["label"] for row in r["formats"] if row["fixed"] and row["errors"][FD]["median"] <= t]
            L.append(f"- ∇FD within {t:g} on every state: {', '.join(ok_max) or 'none'}")
            L.append(f"- ∇FD within {t:g} on the median state: {', '.join(ok_med) or 'none'}")
        L.append("")
    L += ["## Summary: narrowest formats that keep ∇FD within the bound on every state", "",
          "| robot | bound | narrowest W (its I) | all passing formats |", "|---|---|---|---|"]
    for rname, r in res["robots"].items():
        for t in THRESHOLDS:
            ok = [row for row in r["formats"] if row["fixed"] and row["errors"][FD]["max"] <= t]
            best = min(ok, key=lambda row: (row["W"], row["I"]), default=None)
            L.append(f"| {rname} | {t:g} | {best['label'] if best else 'none'} | "
                     f"{', '.join(row['label'] for row in ok) or 'none'} |")
    L.append("")
    return "\n".join(L)


def plot(res: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    robots = list(res["robots"])
    fig, axes = plt.subplots(1, len(robots), figsize=(6 * len(robots), 4.5), sharey=True, squeeze=False)
    for ax, rname in zip(axes[0], robots):
        rows = [row for row in res["robots"][rname]["formats"] if row["fixed"]]
        for I in sorted({row["I"] for row in rows}):
            pts = sorted((row["W"], row["errors"][FD]["max"], row["errors"][FD]["median"]) for row in rows
                         if row["I"] == I)
            W = [p[0] for p in pts]
            ln, = ax.semilogy(W, [min(p[1], 1e3) for p in pts], "o-", label=f"I = {I}, max")
            ax.semilogy(W, [min(p[2], 1e3) for p in pts], "x--", color=ln.get_color(), alpha=0.6,
                        label=f"I = {I}, median")
        for t in THRESHOLDS:
            ax.axhline(t, color="grey", lw=0.8, ls=":")
        for row in res["robots"][rname]["formats"]:
            if not row["fixed"]:
                ax.axhline(row["errors"][FD]["max"], color="black", lw=0.6, ls="-.")
                ax.text(WIDTHS[0], row["errors"][FD]["max"] * 1.3, f"{row['label']} (max)", fontsize=7)
        ax.set_title(f"{rname}: ∇FD (aba_derivatives) relative error")
        ax.set_xlabel("W (total bits of ap_fixed<W, I>)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("max|x − y| / max(1, max|y|) over states")
    axes[0][-1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", default=",".join(ROBOTS), help="comma-separated: " + ", ".join(ROBOTS))
    ap.add_argument("--states", type=int, default=256, help="random states per robot (default 256)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--opt", default="-O0", help="g++ optimisation of the C simulation (default -O0: compile "
                                                 "time dominates; the arithmetic is the same)")
    ap.add_argument("--quick", action="store_true", help="3 formats, 32 states, written to benchmarks/.build/")
    ap.add_argument("--out", default=None, help="output folder (default benchmarks/results)")
    args = ap.parse_args(argv)
    formats = [(W, I) for W in WIDTHS for I in INTS if I < W]
    n_states = args.states
    out = Path(args.out) if args.out else HERE / "results"
    if args.quick:
        formats, n_states = [(24, 12), (32, 16), (48, 20)], 32
        out = Path(args.out) if args.out else HERE / ".build" / "quick-results"
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault(CACHE_ENV, tempfile.mkdtemp(prefix="rbdgen-hls-bench-"))
    cxx = os.environ.get("CXX", "g++")
    try:
        compiler = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        compiler = cxx
    t0 = time.time()
    res = {"rbdgen": rbdgen.__version__, "git": git_revision(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
           "compiler": compiler, "opt": args.opt, "rounding": "AP_RND_CONV", "overflow": "AP_SAT",
           "thresholds": list(THRESHOLDS), "robots": {}}
    for rname in args.robots.split(","):
        stem, floating, desc = ROBOTS[rname]
        model = rbdgen.load_urdf(rbdgen.robots.path(stem), floating_base=floating).with_frames("leaves")
        env = states(model, n_states, args.seed)
        expected = {k: registry.reference(model, k, env) for k in KERNELS}
        rows = []
        variants = [("double", None, "float64"), ("float", None, "float32")] + \
                   [(f"ap_fixed<{W},{I}>", (W, I), "float64") for W, I in formats]
        for label, fixed, dtype in variants:
            tb = time.time()
            kern = rbdgen.build(model, target="hls", dtype=dtype, fixed=fixed, opt=args.opt)
            build_s = time.time() - tb
            tr = time.time()
            errs = per_state_errors(kern, model, env, expected)
            run_s = time.time() - tr
            rows.append({"label": label, "fixed": fixed is not None, "W": fixed[0] if fixed else None,
                         "I": fixed[1] if fixed else None, "errors": errs, "build_s": round(build_s, 1),
                         "run_s": round(run_s, 1)})
            print(f"{rname} {label:>16}: build {build_s:5.1f}s run {run_s:5.1f}s  ∇FD max {fmt_err(errs[FD]['max'])} "
                  f"median {fmt_err(errs[FD]['median'])}", flush=True)
        res["robots"][rname] = {"description": desc, "states": n_states, "seed": args.seed, "formats": rows}
    res["wall_s"] = round(time.time() - t0, 1)
    (out / "hls_accuracy.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "hls_accuracy.md").write_text(markdown(res))
    png = plot(res, out / "hls_accuracy.png")
    print(f"wrote {out}/hls_accuracy.json, .md{', .png' if png else ' (no matplotlib: no plot)'} "
          f"in {res['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
