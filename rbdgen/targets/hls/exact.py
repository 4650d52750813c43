"""A kernel's fixed-point outputs in exact integer arithmetic: what the HLS target's C simulation
computes on ``ap_fixed<W, I, rounding, overflow>`` and the Verilog modules compute, bit for bit,
without a compiler (issue 48: the generated testbench's expected outputs).

Each IR node is its operation's exact result quantised once to the datapath type, as the HLS
C++ writes one statement per node: a product rounded at the last fractional bit then brought to W
bits by the overflow mode, a sum, difference or negation brought to W bits, a constant quantised
(:func:`rbdgen.targets.hls.cost.quantise`), a quotient as ``rbd_div`` (the dividend's raw bits
shifted left by F, divided by the divisor's, truncated toward zero, saturated; a zero divisor
gives the extreme of the dividend's sign), sine and cosine by the CORDIC of
:mod:`rbdgen.targets.hls.cordic` in its integer widths (every intermediate wrapped to its width,
as ``ap_int`` does), and ∇FD's dense products as the HLS loop accumulates them (each step the
exact difference of the accumulator and the exact product, quantised once). Rounding AP_RND_CONV
and AP_TRN, overflow AP_SAT and AP_WRAP: the modes the Verilog target implements.

Raw values are Python integers: x = raw · 2^−F.
"""
from __future__ import annotations

from ...errors import RbdgenError
from .cordic import cordic
from .cost import quantise


def _wrap(v: int, w: int) -> int:
    """``v`` as a ``w``-bit two's complement integer (``ap_int<w>`` of it)."""
    m = 1 << w
    v &= m - 1
    return v - m if v >> (w - 1) else v


class Datapath:
    """The operations of ``ap_fixed<W, I, rounding, overflow>`` on raw integers."""

    def __init__(self, nt):
        if nt.kind != "fixed" or nt.rounding not in ("AP_RND_CONV", "AP_TRN") or \
                nt.overflow not in ("AP_SAT", "AP_WRAP"):
            raise RbdgenError(f"the exact model implements ap_fixed with AP_RND_CONV or AP_TRN and AP_SAT or "
                              f"AP_WRAP, not {nt.describe()}")
        self.nt = nt
        self.W, self.F = nt.W, nt.frac_bits
        self.hi, self.lo = (1 << (self.W - 1)) - 1, -(1 << (self.W - 1))
        self.c = cordic(nt.W, nt.I)

    def q(self, v: int, drop: int) -> int:
        """``v`` (with ``drop`` more fractional bits than the datapath) rounded at the datapath's
        last fractional bit, then brought to W bits by the overflow mode."""
        if drop > 0:
            fl = v >> drop
            if self.nt.rounding == "AP_RND_CONV":
                rest, half = v - (fl << drop), 1 << (drop - 1)
                fl += 1 if rest > half or (rest == half and fl & 1) else 0
            v = fl
        if self.nt.overflow == "AP_SAT":
            return min(self.hi, max(self.lo, v))
        return _wrap(v, self.W)

    def const(self, x: float) -> int:
        return quantise(x, self.W, self.nt.I, self.nt.rounding, self.nt.overflow)

    def mul(self, a: int, b: int) -> int:
        return self.q(a * b, self.F)

    def div(self, a: int, b: int) -> int:
        if b == 0:
            return self.lo if a < 0 else self.hi
        t = abs(a << self.F) // abs(b)
        t = t if (a < 0) == (b < 0) else -t
        return min(self.hi, max(self.lo, t))

    def acc(self, acc: int, p: int, neg: bool) -> int:
        """One step of a dense product's sum: acc ∓ p, p the exact product of two raw values."""
        return self.q((acc << self.F) + (-p if neg else p), self.F)

    def sincos(self, x: int) -> tuple[int, int]:
        c = self.c
        F, FI, WC = c.F, c.FI, c.WC
        k = _wrap(_wrap(x * c.C2PI + (1 << (F + c.M - 1)), c.W_KPROD) >> (F + c.M), c.KW)
        kpi = _wrap(k * c.PIO2 + (1 << (c.L - 1)), c.W_RPROD)
        rw = _wrap(_wrap(x << (FI - F), c.W_R) - _wrap(kpi >> c.L, c.W_R), c.W_R)
        z, xr, yr = _wrap(rw, WC), c.kinv, 0
        for i in range(c.N):
            if z < 0:
                xr, yr, z = _wrap(xr + (yr >> i), WC), _wrap(yr - (xr >> i), WC), _wrap(z + c.atan[i], WC)
            else:
                xr, yr, z = _wrap(xr - (yr >> i), WC), _wrap(yr + (xr >> i), WC), _wrap(z - c.atan[i], WC)
        k0, k1 = k & 1, (k >> 1) & 1
        sr = (-xr if k1 else xr) if k0 else (-yr if k1 else yr)
        cr = (yr if k1 else -yr) if k0 else (-xr if k1 else xr)
        return self.q(_wrap(sr, WC), FI - F), self.q(_wrap(cr, WC), FI - F)


def outputs(kernel, nt, inputs: dict, peak: list | None = None) -> dict:
    """The raw outputs of traced ``kernel`` (every array of ``kernel.all_outputs``, flat) for one
    state of raw ``inputs`` (name → list of raw integers). ``peak``: a one-element list that
    receives the largest magnitude of any value computed (raw), if larger than what it holds."""
    d = Datapath(nt)
    val: dict[int, int] = {}
    angles: dict[int, tuple] = {}
    for n in kernel.live_nodes():
        op = n.op
        if op == "const":
            val[n.id] = d.const(n.value)
        elif op == "input":
            val[n.id] = inputs[n.name][n.index]
        elif op in ("sin", "cos"):
            a = n.args[0].id
            if a not in angles:
                angles[a] = d.sincos(val[a])
            val[n.id] = angles[a][0 if op == "sin" else 1]
        else:
            x = [val[a.id] for a in n.args]
            if op == "mul":
                val[n.id] = d.mul(*x)
            elif op == "add":
                val[n.id] = d.q(x[0] + x[1], 0)
            elif op == "sub":
                val[n.id] = d.q(x[0] - x[1], 0)
            elif op == "neg":
                val[n.id] = d.q(-x[0], 0)
            elif op == "div":
                val[n.id] = d.div(*x)
            else:
                raise RbdgenError(f"{kernel.name}: no exact model of operation {op!r}")
    if peak is not None:
        peak[0] = max(peak[0], max((abs(x) for x in val.values()), default=0))
    arrays = {a.name: [val[v.node.id] for v in vals] for a, vals in kernel.traced_arrays()}
    for mm in kernel.post:
        if mm.scale not in (1.0, -1.0):
            raise RbdgenError(f"{kernel.name}: products scaled by ±1 only ({mm.out} is scaled by {mm.scale:g})")
        A, B = arrays[mm.a], arrays[mm.b]
        out = []
        for i in range(mm.n):
            for j in range(mm.m):
                acc = 0
                for l in range(mm.k):  # noqa: E741
                    acc = d.acc(acc, A[i * mm.k + l] * B[l * mm.m + j], mm.scale == -1.0)
                out.append(acc)
        arrays[mm.out] = out
        if peak is not None:
            peak[0] = max(peak[0], max((abs(x) for x in out), default=0))
    return {a.name: arrays[a.name] for a in kernel.all_outputs}
