#!/usr/bin/env python3
"""Every URDF of example-robot-data against Pinocchio: robots the test suite does not load.

    python benchmarks/robots.py             # `make bench-robots`: benchmarks/results/robots.{json,md}
    python benchmarks/robots.py --only talos,ur5 --jobs 1
    python benchmarks/robots.py --only pr2,go2 --compile rnea,crba,aba,minv   # and compiled, as validate

The test suite checks 16 robots of example-robot-data (tests/conftest.py: ROBOTS) against
Pinocchio; the package holds more. Each of its URDF files, loaded with a fixed and with a floating
base, is compared on 2 random states with Pinocchio's Python bindings for every kernel that has a
Pinocchio counterpart (the registry's ``pinocchio``), twice:

* the NumPy reference (``rbdgen.reference``);
* the kernel as traced and pruned for that robot (``registry.trace``), run by the IR's NumPy
  interpreter (``rbdgen.ir.interp``): the operations the CPU, CUDA and HLS printers print, without
  a compiler (tests/test_cpu_kernels.py and the others show the printed code computes what its
  trace does, on the suite's robots).

``--compile K,…``: each case's kernels K are also built (``rbdgen.build``, the compile cache) and
checked as ``rbdgen validate`` checks them (4 states, batch and single, against the reference and
Pinocchio): the printed code on robots the suite does not compile (~20–60 s a case).

Mimic joints are coupled (the default) where Pinocchio's ``mimic=True`` loads the file, and
loaded as ordinary joints on both sides (``mimic="independent"``, Pinocchio without ``mimic``)
where it does not. A file rbdgen refuses is listed with the first line of its error.
Errors: max |rbdgen − Pinocchio| / max(1, max |Pinocchio|) per output, worst over the outputs and
states; above 1e-9 is a disagreement. Not a test: it reads every robot of the package (minutes), and
a robot that disagrees is a finding to look into (ill-conditioned mass matrices are one: icub).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import traceback
import warnings
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import measure  # noqa: E402  (first: the thread settings, before NumPy)

import numpy as np  # noqa: E402

#: a disagreement above this (relative max-norm error, as tests/conftest.relerr)
BOUND = 1e-9
NSTATES = 2


def _suite_robots() -> set:
    from conftest import ROBOTS

    return {r.relpath for r in ROBOTS if not r.relpath.startswith("bundled:")}


def one(rel: str, floating: bool, compiled: tuple = ()) -> dict:
    """Load ``rel`` (below example-robot-data's robots/) and compare it; a dict for the report."""
    import pinocchio as pin

    import rbdgen
    from rbdgen import registry
    from rbdgen.errors import RbdgenError
    from rbdgen.ir.interp import run
    from conftest import _erd_dir, random_state, relerr

    path = str(_erd_dir() / rel)
    row = {"urdf": rel, "base": "floating" if floating else "fixed"}
    mode = "couple"
    t0 = time.perf_counter()
    try:
        pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer(), mimic=True) if floating \
            else pin.buildModelFromUrdf(path, mimic=True)
    except Exception as e:  # Pinocchio 4.1 refuses some mimic joints ("… not in the kinematic tree")
        mode, why = "independent", str(e).splitlines()[0] if str(e) else type(e).__name__
        try:
            pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
            row["pinocchio_mimic"] = why
        except Exception as e2:
            pm, row["pinocchio"] = None, str(e2).splitlines()[0] if str(e2) else type(e2).__name__
    row["mimic"] = mode
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = rbdgen.load_urdf(path, floating_base=floating, mimic=mode)
    except RbdgenError as e:
        msg = str(e).splitlines()[0]
        msg = msg[len(path) + 2:] if msg.startswith(path + ": ") else msg
        row["refused"] = msg.split(" — ")[0]  # the lumped body's problem (its link's follows)
        return row
    row.update(nv=model.nv, nb=model.nb)
    if pm is None:
        return row
    if pm.nv != model.nv:
        row["error"] = f"nv {model.nv} against Pinocchio's {pm.nv}"
        return row
    model = model.with_frames(tuple(model.leaf_links[:2]))
    pm.rbdgen_frames = model.frames  # the frame kernels' counterparts look them up by name
    data = pm.createData()
    q, v, a, tau = random_state(model, seed=zlib.crc32(rel.encode()) % 1000, n=NSTATES)
    try:
        env = registry.complete_inputs(model, {"q": q, "v": v, "a": a, "tau": tau})
    except np.linalg.LinAlgError as e:  # M⁻¹, an input of fd_derivatives_minv: a massless moving link
        row["error"] = f"the mass matrix is singular ({e}): a moving link without mass"
        return row
    ref_err, ir_err, failed = {}, {}, {}
    coupled = getattr(model, "coupled", False)
    for name in registry.kernels():
        decl = registry.get(name)
        if decl.constraints or decl.pinocchio is None or not registry.supports(model, name):
            continue
        try:
            env_k = decl.pinocchio_env(model, env) if decl.pinocchio_env else env
        except Exception as e:  # the stale kernels' fixed point needs aba
            failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
            continue
        try:
            exp = [decl.pinocchio(pin, pm, data, model.to_pinocchio_q(q[s]), *(env_k[x][s] for x in decl.input_names[1:]))
                   for s in range(NSTATES)]
        except Exception as e:
            if not (coupled and "imic" in str(e)):  # Pinocchio 4: no mimic joints in its dynamics' derivatives
                failed[name] = f"Pinocchio: {str(e).splitlines()[0][:100]}"
            continue
        try:
            got = registry.reference(model, name, env_k)
            ref_err[name] = max(relerr(g[s], x) for s in range(NSTATES) for g, x in zip(got, exp[s], strict=True))
            kern = registry.trace(model, name)
            outs = run(kern, *(env_k[x] for x in decl.input_names))
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            ir_err[name] = max(relerr(np.asarray(g)[s], x) for s in range(NSTATES) for g, x in zip(outs, exp[s], strict=True))
        except Exception as e:
            failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    if "minv" in ref_err and not max(ref_err["minv"], ir_err.get("minv", 0.0)) <= BOUND:
        row["minv_arbiter"] = _minv_arbiter(model, pm, data, q)
    row.update(kernels=len(ref_err), ref_worst=max(ref_err.values(), default=None),
               ir_worst=max(ir_err.values(), default=None),
               above={k: max(ref_err.get(k, 0.0), ir_err.get(k, 0.0)) for k in ref_err
                      if not max(ref_err[k], ir_err.get(k, 0.0)) <= BOUND},
               failed=failed)
    if compiled:
        from rbdgen import validate as V

        try:
            rows = V.validate(model, kernels=[k for k in compiled if registry.supports(model, k)], states=4)
            row["compiled"] = {r.kernel: {"reference": r.err_ref, "pinocchio": r.err_pin, "passed": r.passed}
                               for r in rows}
        except RbdgenError as e:
            row["compiled_error"] = str(e).splitlines()[0]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def _minv_arbiter(model, pm, data, q) -> list:
    """Where M⁻¹ disagrees: per state, cond(M) and how far each side's M⁻¹ is from a third
    one, NumPy's inverse of the reference M with a step of iterative refinement."""
    import pinocchio as pin

    from rbdgen import reference as ref
    from conftest import relerr

    out = []
    for s in range(len(q)):
        M = np.asarray(ref.crba(model, q[s]), dtype=float)
        X0 = np.linalg.inv(M)
        X = X0 + X0 @ (np.eye(len(M)) - M @ X0)
        P = pin.computeMinverse(pm, data, model.to_pinocchio_q(q[s]))
        P = np.triu(P) + np.triu(P, 1).T  # Pinocchio fills the upper triangle
        out.append({"cond": float(np.linalg.cond(M)), "rbdgen": relerr(np.asarray(ref.minv(model, q[s])), X),
                    "pinocchio": relerr(P, X)})
    return out


def _one(args):
    from conftest import _erd_dir

    try:
        row = one(*args[:2], compiled=args[2])
    except Exception:
        row = {"urdf": args[0], "base": "floating" if args[1] else "fixed", "crash": traceback.format_exc()[-600:]}
    # messages name files relative to the package's robots/ folder, not this machine's paths
    root = str(_erd_dir()) + os.sep
    return json.loads(json.dumps(row).replace(json.dumps(root)[1:-1], "")
                      .replace("LinAlgError: Singular matrix", "the mass matrix is singular (a moving link without mass)"))


def report(rows: list, meta: dict) -> str:
    suite = _suite_robots()
    compiled = list(dict.fromkeys(k for r in rows for k in r.get("compiled", {})))
    out = ["# Every example-robot-data URDF against Pinocchio", "",
           f"Produced by `make bench-robots` (benchmarks/robots.py) on {meta['date']} in {meta['minutes']:.1f} min; "
           f"rbdgen {meta['rbdgen']}, Pinocchio {meta['pinocchio']}, example-robot-data's files as the `pin` wheel "
           "ships them. Method: the docstring of benchmarks/robots.py. *reference* and *traced*: the worst error of "
           "the NumPy reference and of the traced kernels (the IR interpreter) against Pinocchio over every kernel "
           f"with a Pinocchio counterpart, {NSTATES} random states; above {BOUND:g} is listed. "
           "*suite*: the test suite loads this file too."
           + (f" Compiled (`--compile`): {', '.join(compiled)}, built for every case and checked as `rbdgen validate` "
              "checks them (4 states, batch and single, against the reference and Pinocchio)." if compiled else ""), ""]
    ok = [r for r in rows if "kernels" in r and not r["above"] and not r["failed"]]
    out.append(f"{len(rows)} cases ({len({r['urdf'] for r in rows})} files, fixed and floating base): "
               f"{len(ok)} agree on every kernel compared; "
               f"{sum(1 for r in rows if 'refused' in r)} refused by rbdgen; "
               f"{sum(1 for r in rows if r.get('above') or r.get('failed') or 'error' in r or 'crash' in r)} "
               "with a disagreement or a failure.")
    if compiled:
        passed = sum(1 for r in rows if r.get("compiled") and all(c["passed"] for c in r["compiled"].values()))
        out.append(f"Compiled: {passed} cases pass, "
                   f"{sum(1 for r in rows if r.get('compiled') and not all(c['passed'] for c in r['compiled'].values()))} "
                   f"fail, {sum(1 for r in rows if 'compiled_error' in r)} refused by the build.")
    out += ["", "| URDF | base | suite | mimic | nv | kernels | reference | traced | above the bound, failures, refusal |",
            "|---|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        note = []
        if "refused" in r:
            note.append(f"refused: {r['refused']}")
        if "error" in r:
            note.append(r["error"])
        if "crash" in r:
            note.append("crash: " + r["crash"].strip().splitlines()[-1])
        if r.get("pinocchio"):
            note.append(f"Pinocchio refuses: {r['pinocchio']}")
        if r.get("pinocchio_mimic") and r["base"] == "fixed":
            note.append(f"Pinocchio's mimic=True: {r['pinocchio_mimic']}")
        if "compiled" in r:
            bad = [k for k, c in r["compiled"].items() if not c["passed"]]
            worst = max((max(c["reference"], c["pinocchio"] or 0.0) for c in r["compiled"].values()), default=0.0)
            note.append(f"compiled {', '.join(r['compiled'])}: " + (f"FAIL {', '.join(bad)}" if bad else
                                                                     f"pass (worst {worst:.1e})"))
        if "compiled_error" in r:
            note.append(f"compiled: {r['compiled_error']}")
        note += [f"{k} {e:.1e}" for k, e in r.get("above", {}).items()]
        for s, a in enumerate(r.get("minv_arbiter", ())):
            note.append(f"state {s}: cond(M) {a['cond']:.1e}, against a refined inv(M): rbdgen's M⁻¹ {a['rbdgen']:.1e}, "
                        f"Pinocchio's {a['pinocchio']:.1e}")
        by: dict = {}
        for k, m in r.get("failed", {}).items():
            by.setdefault(m, []).append(k)
        note += [f"{', '.join(ks)}: {m}" for m, ks in by.items()]
        f = lambda x: "" if x is None else f"{x:.1e}"  # noqa: E731
        out.append(f"| {r['urdf']} | {r['base']} | {'yes' if r['urdf'] in suite else ''} | {r.get('mimic', '')} | "
                   f"{r.get('nv', '')} | {r.get('kernels', '')} | {f(r.get('ref_worst'))} | {f(r.get('ir_worst'))} | "
                   f"{'; '.join(note).replace('|', '/')} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated substrings of the URDF paths to keep")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--render", action="store_true", help="rewrite robots.md from robots.json in --out, run nothing")
    ap.add_argument("--compile", default="", help="comma-separated kernels also compiled and checked (rbdgen validate)")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.render:
        d = json.loads((out / "robots.json").read_text())
        (out / "robots.md").write_text(report(d["rows"], d["meta"]))
        return 0
    import pinocchio as pin

    import rbdgen
    from conftest import _erd_dir

    root = _erd_dir()
    files = sorted(os.path.relpath(f, root) for f in glob.glob(str(root / "**" / "*.urdf"), recursive=True))
    if args.only:
        files = [f for f in files if any(s in f for s in args.only.split(","))]
    if not files:
        print(f"no URDF under {root}", file=sys.stderr)
        return 2
    t0 = time.time()
    compiled = tuple(k for k in args.compile.split(",") if k)
    cases = [(f, fb, compiled) for f in files for fb in (False, True)]
    rows = []
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        for r in pool.map(_one, cases):
            print(f"{r['urdf']} {r['base']}: " + ("refused" if "refused" in r else
                  f"worst {r.get('ir_worst')}, above {r.get('above')}, failed {r.get('failed')}" if "kernels" in r
                  else r.get("error", r.get("crash", r.get("pinocchio", "")))[-200:]), flush=True)
            rows.append(r)
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "minutes": (time.time() - t0) / 60,
            "rbdgen": f"{rbdgen.__version__} (commit {measure.git_revision() or 'unknown'})", "pinocchio": pin.__version__}
    out.mkdir(parents=True, exist_ok=True)
    (out / "robots.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (out / "robots.md").write_text(report(rows, meta))
    print(f"wrote {out / 'robots.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
