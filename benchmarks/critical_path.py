#!/usr/bin/env python3
"""The longest chain of dependent operations of a kernel, one state: its latency bound.

    python benchmarks/critical_path.py [--robot iiwa14] [--kernels rnea,crba,aba] [--trig-cycles 65] [--path]

Not part of `make bench`. The op counts of `make bench` bound a kernel's throughput; a one-state
call of a small kernel is bound instead by its chain of dependent operations, which starts with
the joint angles' sines and cosines (docs/performance.md §24). This walks the traced kernel (the
IR every target prints) in creation order and gives each operation the latency of the operation
a compiler makes of it on a core like the development VM's Zen 4 (cycles): a multiply, add or
subtract 3, a negation 1, a division 13, a square root 20; an add or subtract with a multiply
operand read by nothing else 4 from any of its three operands (GCC contracts the pair into one
multiply-add); the sines and cosines ``--trig-cycles`` from the angle (65: a dependent
``rbd_sincos4_inline`` call measured by ab_rev.py, 17.8 ns at ~3.66 GHz; 3 for the stubbed build).
Loads, stores and register moves cost nothing here, and the out-of-order core is assumed to find
every other operation a free slot, so the figure is a bound from below, not a prediction.
``--path`` prints the chain block by block (phase, body, operations, cycles).
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import measure  # noqa: F401  (environment first)
from measure import FRAMES, ROBOTS

import rbdgen
from rbdgen import registry

LATENCY = {"mul": 3, "add": 3, "sub": 3, "neg": 1, "div": 13, "sqrt": 20}
FMA = 4
#: the clock that turns cycles into ns (peak.cpp's scalar multiply rate on the development VM)
GHZ = 3.66


def critical_path(kernel, trig_cycles: int):
    """(cycles, the chain's nodes in order)."""
    live = kernel.live_nodes()
    readers = Counter(a.id for n in live for a in n.args)
    done, before = {}, {}
    for n in live:
        if n.op in ("const", "input"):
            done[n.id] = 0
            continue
        if n.op in ("sin", "cos"):
            done[n.id], before[n.id] = done.get(n.args[0].id, 0) + trig_cycles, n.args[0].id
            continue
        lat, operands = LATENCY.get(n.op, 3), list(n.args)
        if n.op in ("add", "sub"):
            fused = [a for a in n.args if a.op == "mul" and readers[a.id] == 1]
            if fused:
                lat = FMA
                operands = [a for a in n.args if a is not fused[0]] + list(fused[0].args)
        prev = max(operands, key=lambda a: done.get(a.id, 0))
        done[n.id], before[n.id] = done.get(prev.id, 0) + lat, prev.id
    end = max(done, key=done.get)
    nodes = {n.id: n for n in live}
    chain, x = [], end
    while x in nodes and nodes[x].op not in ("const", "input"):
        chain.append(nodes[x])
        x = before.get(x)
    return done[end], chain[::-1], done


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robot", default="iiwa14", help=f"one of {', '.join(ROBOTS)}")
    p.add_argument("--kernels", default="rnea,nle,gravity,crba,aba,minv,forward_kinematics")
    p.add_argument("--trig-cycles", type=int, default=65)
    p.add_argument("--path", action="store_true", help="print each chain block by block")
    args = p.parse_args(argv)
    if args.robot not in ROBOTS:
        p.error(f"--robot: unknown robot {args.robot!r} (known: {', '.join(ROBOTS)})")
    path_fn, floating, _ = ROBOTS[args.robot]
    model = rbdgen.load_urdf(path_fn(), floating_base=floating).with_frames(FRAMES[args.robot])
    print(f"| {args.robot} kernel | operations | chain (cycles) | chain (ns at {GHZ} GHz) |")
    print("|---|---:|---:|---:|")
    for k in args.kernels.split(","):
        kern = registry.trace(model, k)
        cycles, chain, done = critical_path(kern, args.trig_cycles)
        ops = sum(1 for n in kern.live_nodes() if n.op not in ("const", "input"))
        print(f"| {k} | {ops} | {cycles} | {cycles / GHZ:.1f} |")
        if args.path:
            blocks = []
            for n in chain:
                key = (n.block.phase, n.block.body) if n.block else ("?", None)
                if blocks and blocks[-1][0] == key:
                    blocks[-1][1].append(n)
                else:
                    blocks.append((key, [n]))
            start = 0
            for (phase, body), ns in blocks:
                end = done[ns[-1].id]
                print(f"|   {phase}, body {body} | {len(ns)} | {end - start} | |")
                start = end
    return 0


if __name__ == "__main__":
    sys.exit(main())
