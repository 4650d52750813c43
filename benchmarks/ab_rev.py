#!/usr/bin/env python3
"""What a change to the generator moved, kernel by kernel: one state, two revisions, one run.

    python benchmarks/ab_rev.py --base 30e9338 [--robots iiwa14,quadruped] [--kernels rnea,crba] [--rounds 7]
                                [--stub-trig] [--unroll no [--base-unroll yes]]

Not part of `make bench` (issue 49 item 2 asks what moved each kernel and by how much; this is
how docs/performance.md §24 measured it). The kernels are generated and built twice, as
`rbdgen.build` builds them for users (default options, `-march=native`):

- **base**: by the rbdgen of ``--base`` (a commit, extracted with ``git archive`` into a temporary
  folder and imported from there in a process of its own);
- **this tree**: by the rbdgen of the working tree, uncommitted edits included.

Both libraries are timed by the C++ driver of `make bench` (benchmarks/measure.py: a pool of 256
random states, runs of 40 ms, thread CPU time, median of 7 runs), taking turns for ``--rounds``
rounds; each kernel's figure is its best round. The two builds use separate, empty compile
caches. Kernels whose signature differs between the revisions cannot share a driver and are
refused by name.

``--stub-trig`` adds a third build, this tree's with every grouped sine/cosine call replaced by
two multiplies per angle (the same data flow; the results are wrong, only the time counts): what
the kernels spend on their joint angles' sines and cosines is the difference.

Beside the kernels, the latency of the joint angles' sine and cosine as each revision's header
(``<prefix>_sincos.hpp``, beside its library) computes them for one state: a chain of dependent
``rbd_sincos4`` calls (and ``rbd_sincos4_inline`` where the header has it), each call's four
angles computed from the previous call's results, ns per call, best of 5 runs of 2·10⁶ calls.
Every one-state kernel starts from those sines and cosines, so their latency is on its critical
path (docs/performance.md §24).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import measure  # noqa: F401  (environment first)
from fd_profile import FAKE_TRIG
from measure import ROBOTS, build_driver, log, pool_bytes, run_driver, states

import numpy as np

from rbdgen import registry
from rbdgen.targets.cpu import generate_cpu
from rbdgen.toolchain.compiler import find_cxx, resolve_march

REPO = Path(__file__).resolve().parent.parent

#: built in the base revision's own process: the library's path and each kernel's signature
BUILD_SCRIPT = r"""
import json, sys
import rbdgen
from rbdgen.targets.cpu import generate_cpu
urdf, floating, frames, kernels, stub, unroll, constraints = json.loads(sys.argv[1])
if stub:  # every grouped sine/cosine call replaced by two multiplies per angle (fd_profile.FAKE_TRIG)
    FAKE = stub
    import rbdgen.targets.cpu as cpu
    real = cpu.generate_cpu
    def stubbed(*a, **kw):
        gen = real(*a, **kw)
        for fn, text in list(gen.files.items()):
            if fn.endswith("_sincos.hpp"):
                i = text.rindex("#endif")
                gen.files[fn] = text[:i] + FAKE + text[i:]
            elif fn.endswith(".cpp"):
                gen.files[fn] = text.replace("rbd_sincos4_inline(", "rbd_fake_sincos4(").replace("rbd_sincos4(", "rbd_fake_sincos4(")
        return gen
    cpu.generate_cpu = stubbed
model = rbdgen.load_urdf(urdf, floating_base=floating).with_frames(frames)
if constraints:
    from rbdgen.model.constraints import constraints_from_cli
    model = model.with_constraints(constraints_from_cli(constraints, []))
gen = generate_cpu(model, dtypes=("float64",), kernels=kernels, python=False, unroll=unroll)
kern = rbdgen.build(model, kernels=kernels, unroll=unroll)
sig = {k: [[a.name, a.size] for a in list(pk.inputs) + list(pk.outputs)] for k, pk in gen.kernels.items()}
from importlib import resources
templates = str(resources.files("rbdgen.templates"))
print(json.dumps({"path": str(kern.path), "sig": sig, "rbdgen": rbdgen.__file__, "templates": templates}))
"""

#: the sine/cosine latency chain (``{fn}``: rbd_sincos4 or rbd_sincos4_inline)
LATENCY_CPP = r"""
#include "{header}"
#include <cstdio>
#include <ctime>
static double now() {{ timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }}
int main() {{
  double x0 = 0.3, x1 = 0.7, x2 = -1.1, x3 = 2.0, best = 1e30;
  const int n = 2000000;
  for (int rep = 0; rep < 5; ++rep) {{
    const double t = now();
    for (int i = 0; i < n; ++i) {{
      double s0, c0, s1, c1, s2, c2, s3, c3;
      {ns}::{fn}(x0, x1, x2, x3, s0, c0, s1, c1, s2, c2, s3, c3);
      x0 = s0 + 0.5 * c0; x1 = c1 - 0.5 * s1; x2 = s2 * 1.1; x3 = c3 + s3;  // bounded, dependent
      asm volatile("" : "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3));
    }}
    const double dt = (now() - t) / n;
    if (dt < best) best = dt;
  }}
  std::printf("%.2f %g\n", best, x0 + x1 + x2 + x3);
}}
"""

DEFAULT_KERNELS = ("rnea", "nle", "gravity", "crba", "aba", "minv", "forward_kinematics", "rnea_derivatives",
                   "aba_derivatives")


def build_side(tree: Path, cache: Path, urdf: Path, floating: bool, frames: list, kernels: list,
               stub: bool = False, unroll: bool = True, constraints: list = ()) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), RBDGEN_CACHE_DIR=str(cache))
    if stub:
        env["RBDGEN_GENERATION_CACHE"] = "0"  # the stub is applied to what is generated
    r = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, json.dumps([str(urdf), floating, frames, kernels, FAKE_TRIG if stub else "",
                                                              unroll, list(constraints)])],
                       capture_output=True, text=True, env=env, cwd=str(cache))
    if r.returncode != 0:
        raise SystemExit(f"ab_rev: building with the rbdgen of {tree} failed:\n{r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for what in ("rbdgen", "templates"):
        if not out[what].startswith(str(tree)):
            raise SystemExit(f"ab_rev: the build imported {what} from {out[what]}, not from {tree}")
    return out


def trig_latency(cxx: str, flags: list, header: Path, work: Path) -> dict:
    """ns per dependent call of each 4-angle sine/cosine function ``header`` has."""
    ns = header.name[:-len("_sincos.hpp")] + "_trig"
    out = {}
    for fn in ("rbd_sincos4", "rbd_sincos4_inline"):
        if f" {fn}(" not in header.read_text():
            continue
        src = work / f"lat_{fn}.cpp"
        src.write_text(LATENCY_CPP.format(header=header, ns=ns, fn=fn))
        exe = work / f"lat_{fn}"
        r = subprocess.run([cxx, *flags, str(src), "-o", str(exe)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"ab_rev: the latency driver for {header} did not compile:\n{r.stderr[-1500:]}")
        out[fn] = float(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()[0])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the revision to compare with (any git commit-ish)")
    p.add_argument("--robots", default="iiwa14", help=f"comma-separated, of {', '.join(ROBOTS)}")
    p.add_argument("--kernels", default=",".join(DEFAULT_KERNELS))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--stub-trig", action="store_true", help="also this tree with the sines and cosines stubbed out")
    p.add_argument("--unroll", choices=("yes", "no"), default="yes",
                   help="no: both sides' rolled kernels (issue 44; the base must have them)")
    p.add_argument("--base-unroll", choices=("yes", "no"), default=None,
                   help="the base side's lowering, when it differs from --unroll: `--base HEAD --base-unroll yes "
                        "--unroll no` times the rolled kernels against the unrolled ones of one revision, in turns")
    p.add_argument("--out", default=None, help="write every round's medians here as JSON")
    args = p.parse_args(argv)
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", args.base + "^{commit}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        p.error(f"--base {args.base!r}: not a commit of {REPO}")
    rev = rev.stdout.strip()
    robots = args.robots.split(",")
    for r in robots:
        if r not in ROBOTS:
            p.error(f"--robots: unknown robot {r!r} (known: {', '.join(ROBOTS)})")
    cxx = find_cxx()
    work = Path(tempfile.mkdtemp(prefix="rbdgen-abrev-"))
    res = {"base": rev, "robots": {}}
    try:
        base_tree = work / "base"
        base_tree.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
        # the package rbdgen.templates is the repository's templates/ folder (pyproject.toml's
        # package-dir): without this link the editable install's finder would hand the base
        # revision this tree's templates
        if (base_tree / "templates").is_dir() and not (base_tree / "rbdgen" / "templates").exists():
            (base_tree / "rbdgen" / "templates").symlink_to(base_tree / "templates", target_is_directory=True)
        for robot in robots:
            path_fn, floating, _ = ROBOTS[robot]
            urdf = path_fn()
            model = measure.bench_model(robot, urdf, floating)  # its frames and the bench's contacts
            kernels = [k for k in args.kernels.split(",") if k in registry.applicable(model, None)]
            unroll = args.unroll == "yes"
            gen = generate_cpu(model, dtypes=("float64",), kernels=kernels, python=False, unroll=unroll)
            sig = {k: [[a.name, a.size] for a in list(pk.inputs) + list(pk.outputs)] for k, pk in gen.kernels.items()}
            exes, lat = {}, {}
            sides = [("base", base_tree), ("this tree", REPO)] + ([("no trig", REPO)] if args.stub_trig else [])
            for side, tree in sides:
                log(f"{robot}: building {len(kernels)} kernels with the rbdgen of {side} …")
                cache = work / f"cache-{robot}-{side.replace(' ', '_')}"
                cache.mkdir()
                side_unroll = (args.base_unroll or args.unroll) == "yes" if side == "base" else unroll
                built = build_side(tree, cache, urdf, floating, measure.FRAMES[robot], kernels, side == "no trig",
                                   side_unroll, measure.CONSTRAINTS.get(robot, []))
                bad = [k for k in kernels if built["sig"].get(k) != sig[k]]
                if bad:
                    raise SystemExit(f"ab_rev: {', '.join(bad)}: the signature differs between {rev[:9]} and this tree")
                d = work / f"drv-{robot}-{side.replace(' ', '_')}"
                d.mkdir()
                exes[side] = build_driver(cxx, gen, Path(built["path"]), model, d)
                header = Path(built["path"]).parent / f"{gen.prefix}_sincos.hpp"
                march = resolve_march(None)
                if side != "no trig":
                    lat[side] = trig_latency(cxx, ["-std=c++17", "-O3"] + ([f"-march={march}"] if march else []), header, d)
            pool = work / f"pool-{robot}.bin"
            pool.write_bytes(pool_bytes(states(model, np.random.default_rng(12345), 256), model, gen.kernels))
            rounds = {side: {k: [] for k in kernels} for side in exes}
            for i in range(args.rounds):
                log(f"{robot}: round {i + 1}/{args.rounds}")
                for side, exe in exes.items():
                    for k, cell in run_driver(exe, pool, quick=False).items():
                        rounds[side][k].append(cell["median"])
            res["robots"][robot] = {"kernels": rounds, "sincos4_latency_ns": lat}
            lowering = "" if args.base_unroll in (None, args.unroll) else \
                f"; base {'unrolled' if args.base_unroll == 'yes' else 'rolled'}, this tree {'unrolled' if unroll else 'rolled'}"
            print(f"\n{robot}, one state, ns per call (best of {args.rounds} rounds; base {rev[:9]}{lowering}):\n")
            stub = "no trig" in exes
            print("| kernel | base | this tree | this / base |" + (" this tree, sines and cosines stubbed |" if stub else ""))
            print("|---|---:|---:|---:|" + ("---:|" if stub else ""))
            for k in kernels:
                b, t = min(rounds["base"][k]), min(rounds["this tree"][k])
                print(f"| {k} | {b:.1f} | {t:.1f} | {t / b:.3f} |" + (f" {min(rounds['no trig'][k]):.1f} |" if stub else ""))
            for fn in ("rbd_sincos4", "rbd_sincos4_inline"):
                cells = [f"{lat[s][fn]:.1f}" if fn in lat[s] else "—" for s in ("base", "this tree")]
                print(f"| {fn}, dependent calls | {cells[0]} | {cells[1]} | |" + (" |" if stub else ""))
        if args.out:
            Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
