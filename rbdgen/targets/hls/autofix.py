"""``--fixed auto`` (issue 48): per kernel, the narrowest ``ap_fixed<W, I>`` whose error on
sampled states meets a tolerance, measured without a compiler.

For each kernel: ``n`` random states (:func:`rbdgen.registry.random_inputs`, seeded), its float64
reference, and its outputs in the candidate format computed exactly as the HLS C simulation (and
the Verilog modules) compute them (:mod:`rbdgen.targets.hls.exact`, Python integers: a few ms a
state). The error is rbdgen validate's against Pinocchio (the stricter of its two measures),
max |x − y| / max |y| per output array and state, the largest over them. The integer bits I are what the kernel's largest value needs (measured
in a 64-bit format with 24 integer bits on the same states) plus one bit of headroom and the
sign; then the fewest total bits W ≥ I + 4 (bisected: the error falls as fractional bits are
added) whose error is at most **half** the tolerance — the 2× margin rbdgen's declared bounds
keep over what they measured, so that ``validate`` on other states passes the tolerance too.
The tolerance defaults to the kernel's declared float32 bound × 100.

An HLS design holds one datapath type, so ``generate --target hls`` uses the format that covers
every kernel asked for (the most integer bits any kernel needs and the most fractional bits) and
the manifest records each kernel's own choice; the Verilog target builds each module in its
kernel's own format.
"""
from __future__ import annotations

import numpy as np

from ... import registry
from ...errors import RbdgenError
from .cost import quantise
from .emit import DEFAULT_OVERFLOW, DEFAULT_ROUNDING, MAX_W, NumType

#: sampled states per kernel (the search's cost: a few ms of exact arithmetic each)
STATES = 24
SEED = 4801


def default_tol(decl) -> float:
    return decl.float32_tol * 100.0


def _error(kern, nt, env: dict, ref, peak=None) -> float:
    from .exact import outputs

    F = nt.frac_bits
    n = len(next(iter(env.values())))
    got = {a.name: [] for a in kern.all_outputs}
    for s in range(n):
        raw = {a.name: [quantise(float(x), nt.W, nt.I, nt.rounding, nt.overflow) for x in np.ravel(env[a.name][s])]
               for a in kern.inputs}
        out = outputs(kern, nt, raw, peak)
        for name, vals in out.items():
            got[name].append(vals)
    err = 0.0
    for a, r in zip(kern.all_outputs, ref):
        g = np.ldexp(np.array(got[a.name], dtype=float), -F).reshape(np.shape(r))
        for s in range(n):  # per state, as validate compares with Pinocchio (the stricter of its two)
            err = max(err, float(np.max(np.abs(g[s] - r[s])) / max(float(np.max(np.abs(r[s]))), np.finfo(float).tiny)))
    return err


def choose(model, kernel: str, *, tol: float | None = None, rounding: str = "AP_RND_CONV",
           overflow: str = "AP_SAT", states: int = STATES, seed: int = SEED) -> dict:
    """The narrowest format for ``kernel``: {"W", "I", "error" (measured), "tol"}."""
    decl = registry.get(kernel)
    tol = default_tol(decl) if tol is None else float(tol)
    if not tol > 0:
        raise RbdgenError(f"--tol must be a positive relative error, got {tol!r}")
    kern = registry.trace(model, kernel)
    env = registry.random_inputs(model, states, seed)
    ref = registry.reference(model, kernel, env)
    # the integer bits its largest value needs, from a wide format on the same states
    peak = [0]
    wide = NumType("fixed", MAX_W, 24, rounding, overflow)
    _error(kern, wide, env, ref, peak)
    I = max(2, int(peak[0] >> wide.frac_bits).bit_length() + 2)  # noqa: E741 (sign, one bit of headroom)
    if I > MAX_W - 4:
        raise RbdgenError(f"{kernel}: values up to 2^{I - 2} need more integer bits than a {MAX_W}-bit format leaves")
    memo: dict[int, float] = {}

    def err(W: int) -> float:
        if W not in memo:
            memo[W] = _error(kern, NumType("fixed", W, I, rounding, overflow), env, ref)
        return memo[W]

    lo, hi = I + 4, MAX_W
    if not err(hi) <= tol / 2:
        raise RbdgenError(f"{kernel}: no ap_fixed<W,{I}> up to W = {MAX_W} meets --tol {tol:g} with a 2x margin "
                          f"(ap_fixed<{MAX_W},{I}>: {err(hi):.2g} on {states} states); give a larger --tol")
    while lo < hi:
        mid = (lo + hi) // 2
        if err(mid) <= tol / 2:
            hi = mid
        else:
            lo = mid + 1
    return {"W": hi, "I": I, "error": err(hi), "tol": tol}


def choose_all(model, kernels, *, tol=None, rounding="AP_RND_CONV", overflow="AP_SAT", progress=None) -> dict:
    """{kernel: :func:`choose`'s answer} for each of ``kernels``."""
    out = {}
    for k in kernels:
        if progress:
            progress(f"choosing the format of {k} (--fixed auto)")
        out[k] = choose(model, k, tol=tol, rounding=rounding, overflow=overflow)
    return out


def covering(choices: dict) -> tuple[int, int]:
    """One format for every kernel of ``choices``: the most integer and the most fractional bits."""
    I = max(c["I"] for c in choices.values())  # noqa: E741
    F = max(c["W"] - c["I"] for c in choices.values())
    if I + F > MAX_W:
        raise RbdgenError(f"--fixed auto: one format for these kernels needs {I} integer and {F} fractional bits, "
                          f"more than {MAX_W}; generate them separately")
    return I + F, I


def format_auto_table(choices: dict, nt) -> str:
    """The per-kernel choices of ``--fixed auto`` and the design's format, as text."""
    rows = [("kernel", "format", "error (sampled)", "tolerance")]
    for k, c in choices.items():
        rows.append((k, f"ap_fixed<{c['W']},{c['I']}>", f"{c['error']:.1e}", f"{c['tol']:.0e}"))
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["--fixed auto: per kernel the narrowest format whose error on sampled states is at most half "
             "its tolerance"]
    lines += ["  ".join(x.ljust(w) for x, w in zip(r, width)).rstrip() for r in rows]
    lines.append(f"the design's format (covering every kernel): ap_fixed<{nt.W},{nt.I}>")
    return "\n".join(lines)


def resolve_fixed(model, kernels, fixed, tol=None, rounding=None, overflow=None, progress=None):
    """``fixed`` as (W, I), and the per-kernel choices of ``--fixed auto`` (else None): the
    format covering every kernel's (see :mod:`rbdgen.targets.hls.autofix`)."""
    if fixed != "auto":
        if tol is not None:
            raise RbdgenError("--tol is the accuracy --fixed auto chooses formats for; give --fixed auto with it")
        return fixed, None
    choices = choose_all(model, kernels, tol=tol, rounding=rounding or DEFAULT_ROUNDING,
                         overflow=overflow or DEFAULT_OVERFLOW, progress=progress)
    return covering(choices), choices
