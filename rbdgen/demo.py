"""`make demo` / `rbdgen demo`: what rbdgen does, end to end, on a bundled robot.

1. load the bundled KUKA iiwa 14;
2. generate pruned C++ kernels, compile them (cached) and load them;
3. validate every kernel against the reference and Pinocchio (:func:`rbdgen.validate.validate`);
4. print how much pruning saved and a small timing table;
5. the same IR for the other targets: CUDA (compiled with nvcc for sm_80 and sm_90, the GPU
   program run on the CPU when there is no GPU) and FPGA (HLS C++ C-simulated in Q16.16 fixed
   point), each checked against the reference.
"""
from __future__ import annotations

import os
import time

import click

from . import registry
from .model import load_urdf
from .validate import pinocchio_model, random_states, validate


def _time_per_call(f, budget=0.15):
    f()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        t = time.perf_counter() - t0
        if t > budget or n > 1 << 20:
            return t / n
        n *= 4


def run_demo(opt: str = "-O3", kernels=None) -> None:
    """``make demo``: build the iiwa14's kernels (all of them, -O3), validate and time them.
    ``opt`` and ``kernels`` are passed to :func:`rbdgen.build` (the tests take a cheaper build)."""
    from . import build, robots
    from .algorithms import trace

    t0 = time.perf_counter()
    model = load_urdf(robots.path("iiwa14"))
    click.echo(f"== {model.name}: {model.nb} bodies, nq={model.nq}, nv={model.nv}, fixed base, "
               f"{model.total_mass:.2f} kg ({len(model.merged_fixed)} fixed joint merged) — {robots.path('iiwa14')}")

    click.echo(f"\n-- generating and compiling C++ kernels (g++ {opt}, cached after the first run) ...")
    t1 = time.perf_counter()
    kern = build(model, kernels=kernels, opt=opt, progress=lambda msg: click.echo(f"   {msg}"))
    click.echo(f"   ready in {time.perf_counter() - t1:.1f} s: {kern.path}")

    click.echo("\n-- validation on 64 random states, batch and single state (max relative error)")
    rows = validate(model, compiled=kern, kernels=kern.kernels, states=64)
    w = max([17] + [len(r.kernel) for r in rows])
    click.echo(f"   {'kernel':<{w}} {'ops pruned':>10} {'ops dense':>10} {'saved':>6}  {'vs reference':>12} {'vs Pinocchio':>12}")
    for r in rows:
        dense = trace(model, r.kernel, fold=False).op_counts()["total"]
        pin = "n/a" if r.err_pin is None else f"{r.err_pin:.1e}"
        click.echo(f"   {r.kernel:<{w}} {r.ops:>10} {dense:>10} {1 - r.ops / dense:>6.0%}  {r.err_ref:>12.1e} {pin:>12}")
    if rows[0].note:
        click.echo(f"   Pinocchio: {rows[0].note}")

    click.echo(f"\n-- time per state on this machine ({os.cpu_count()} cores; Python call overhead included)")
    click.echo(f"   {'kernel':<{w}} {'single':>10} {'batch 1024':>11} {'NumPy ref':>11} {'Pinocchio*':>11}")
    Nb = 1024
    st = random_states(model, Nb)
    pin, pm = pinocchio_model(model)
    data = pm.createData() if pin is not None else None
    qp = model.to_pinocchio_q(st["q"][0])
    for r in rows:
        method = kern.kernel(r.kernel)
        names = [n for n, _ in kern.methods[r.kernel].inputs]
        argsb = [st[n] for n in names]
        args1 = [a[0] for a in argsb]
        out1, outb = method(*args1), method(*argsb)
        t_single = _time_per_call(lambda: method(*args1, out=out1))
        t_batch = _time_per_call(lambda: method(*argsb, out=outb)) / Nb
        decl = registry.get(r.kernel)
        t_ref = _time_per_call(lambda: decl.reference(model, *args1), budget=0.05)
        # a kernel checked against Pinocchio only at special inputs (pinocchio_env: the stale-data
        # kernels at their fixed point) has no Pinocchio counterpart to time
        t_pin = (_time_per_call(lambda: decl.pinocchio(pin, pm, data, qp, *args1[1:]), budget=0.05)
                 if pin is not None and decl.pinocchio is not None and decl.pinocchio_env is None else float("nan"))
        pin_cell = f"{t_pin * 1e9:>9.0f}ns" if t_pin == t_pin else f"{'-':>11}"
        click.echo(f"   {r.kernel:<{w}} {t_single * 1e9:>8.0f}ns {t_batch * 1e9:>9.0f}ns {t_ref * 1e6:>9.0f}µs "
                   f"{pin_cell}")
    if pin is None:
        click.echo(f"   * Pinocchio: {pm}; its column is left empty")
    else:
        click.echo("   * Pinocchio through its Python bindings (call overhead included); `make bench` compares "
                   "against Pinocchio's C++; -: no Pinocchio function computes it (rnea_stale*: checked against "
                   "Pinocchio's rnea at its fixed point)")

    ok = all(r.passed for r in rows) and _other_targets(model, rows)
    worst_ref = max(r.err_ref for r in rows)
    pins = [r.err_pin for r in rows if r.err_pin is not None]
    vs_pin = f"{max(pins):.1e} vs Pinocchio" if pins else "not compared with Pinocchio (not installed or cannot load)"
    click.echo(f"\nC++ kernels, worst error: {worst_ref:.1e} vs reference, {vs_pin} (bound 1e-9)"
               f"; all targets -> {'OK' if ok else 'FAILED'}   [{time.perf_counter() - t0:.1f} s]")
    click.echo("next: `rbdgen generate robots/iiwa14.urdf --out DIR` writes these kernels as an importable package;"
               " `rbdgen validate <your robot>.urdf` checks them on your robot")
    if not ok:
        raise SystemExit(1)


def _other_targets(model, rows) -> bool:
    """The cheapest and the costliest kernel (by op count) through the CUDA and HLS backends,
    validated as `rbdgen validate --target …` does (against the reference; CUDA in float64 to
    1e-9, HLS in ap_fixed<32,16> to the bounds declared with each kernel). True when all pass."""
    from . import build
    from .errors import RbdgenError

    picked = tuple(r.kernel for r in (min(rows, key=lambda r: r.ops), max(rows, key=lambda r: r.ops)))
    ok = True
    click.echo(f"\n-- other targets from the same IR: {' and '.join(picked)}, 64 random states")
    try:
        t1 = time.perf_counter()
        cu = build(model, target="cuda", kernels=picked, arch="80,90", opt="-O1")
        gpu = cu.device_count() > 0
        res = validate(model, target="cuda", kernels=picked, states=64, seed=1, pinocchio=False, compiled=cu,
                       emulate=not gpu)
        where = "on the GPU" if gpu else "no GPU here: the GPU program emulated on the CPU"
        click.echo(f"   cuda (nvcc, sm_80 + sm_90, {time.perf_counter() - t1:.0f} s): {where}; "
                   + ", ".join(f"{r.kernel} {r.err_ref:.1e}" for r in res) + " (bound 1e-9)")
        ok &= all(r.passed for r in res)
    except RbdgenError as ex:  # no nvcc: say so, the CPU kernels above stand
        click.echo(f"   cuda: skipped ({ex})")
    try:
        t1 = time.perf_counter()
        res = validate(model, target="hls", kernels=picked, states=64, seed=1, pinocchio=False, fixed=(32, 16))
        click.echo(f"   fpga (HLS C simulation, ap_fixed<32,16>, the hardware's own arithmetic and CORDIC sin/cos, "
                   f"{time.perf_counter() - t1:.0f} s): "
                   + ", ".join(f"{r.kernel} {r.err_ref:.1e} (bound {r.tol:.0e})" for r in res)
                   + "; `make bench-hls` sweeps formats")
        ok &= all(r.passed for r in res)
    except RbdgenError as ex:  # no ap_types headers: say so
        click.echo(f"   fpga: skipped ({ex})")
    return ok
