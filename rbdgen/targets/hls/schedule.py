"""A DSP budget for the HLS kernels: a resource-constrained list schedule of a kernel's IR, and
the operator allocation it implies (``rbdgen generate --target hls --dsp-budget N``,
``inspect --cost --target hls --dsp-budget N``, ``build(..., dsp_budget=N)``).

The unbudgeted cost model (:mod:`rbdgen.targets.hls.cost`) schedules every operation as soon as
possible and counts the operators that schedule needs at its busiest cycle. Here the operators
are given first and the operations wait for them:

* **Operator classes and budgets.** ``mul`` (DSP-mapped multipliers), ``sincos`` (CORDIC units),
  ``div`` (dividers) and ``add`` (adders/subtracters, LUT carry chains); each either limited to
  a number of instances or unlimited (``None``). A limited class never has more operations in
  flight in a cycle than it has instances; a pipelined operator (multipliers, CORDIC units)
  takes a new operation every cycle, a sequential divider is busy for all of its cycles.
* **Latencies** are the cost model's: registered operators start on cycle boundaries and take
  whole cycles, adders chain within a cycle (:class:`rbdgen.targets.hls.cost.Model`).
* **List scheduling with critical-path priority**: cycle by cycle, the operations whose operands
  are ready compete for their class's free instances, the one with the longest path to the end
  of the kernel first (ties: the earlier node). Unlimited classes start as soon as their
  operands are ready, so with no limit at all this *is* the as-soon-as-possible schedule and
  its length is the cost model's ``latency_cycles``.

Under a DSP budget of N slices (ap_fixed datapaths):

* Every multiplier is a **shared, full-width** W×W instance (⌈W/27⌉·⌈W/18⌉ DSP48E2 and that
  latency, also for products by a constant): ``#pragma HLS ALLOCATION operation instances=mul
  limit=M`` caps the tool at M multipliers but does not say which products share one, so only
  full-width instances make ``M × slices ≤ N`` a guarantee whatever the tool binds.
* The CORDIC becomes a **shared, pipelined unit** (``rbd_sincos`` not inlined, ``PIPELINE
  II=1``, ``ALLOCATION function instances=rbd_sincos limit=S``), its two constant products
  counted as its DSPs.
* Dividers and adders use no DSPs and stay unlimited (the schedule reports how many it used).
* The split of N between multipliers and CORDIC units is searched (S ∈ {1, 2, 4, 8, all
  angles}, M = ⌊(N − S·slices_sincos) / slices_mul⌋); the shortest schedule wins, then the
  fewest DSPs; then M is bisected down to the fewest multipliers that keep that length (a
  budget is a ceiling, not a target). The pragma limits are the instances the final schedule
  uses.
* The dense ∇FD products (the epilogue loop, one output element per ``PIPELINE`` step, k
  products each) take II = ⌈k / M⌉ cycles per element on M < k multipliers, with M ≥ 2k
  process ⌊M / k⌋ elements of a row per step (``UNROLL factor``), from k·m on whole rows, and
  with k multipliers for every element of every product all of them in one step, the products
  side by side (:func:`epilogue_plan`).
* **Back-to-back states**: a pipelined (modulo-scheduled) version of the same operators reaches
  II = max over classes of ⌈operations × busy cycles / instances⌉ (no recurrence between
  states); the latency design as generated starts a new state when the last one is done.

floating-point datapaths are not budgeted: their adders use DSPs too (see docs/hls.md).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from ...errors import RbdgenError
from .cost import Model, _classify, mux_lut

#: the operator classes a budget can limit
CLASSES = ("mul", "sincos", "div", "add")

#: --part presets: name → (part number for the synthesis script, DSP48E2 slices, CLB LUTs,
#: board/card) — the device counts of AMD's UltraScale+ product tables
PARTS = {
    "vcu118": ("xcvu9p-flga2104-2L-e", 6840, 1182240, "VCU118 board (Virtex UltraScale+ XCVU9P)"),
    "xcvu9p": ("xcvu9p-flga2104-2L-e", 6840, 1182240, "Virtex UltraScale+ XCVU9P"),
    "u250": ("xcu250-figd2104-2L-e", 12288, 1728000, "Alveo U250 card"),
    "u280": ("xcu280-fsvh2892-2L-e", 9024, 1303680, "Alveo U280 card"),
    "zcu102": ("xczu9eg-ffvb1156-2-e", 2520, 274080, "ZCU102 board (Zynq UltraScale+ ZU9EG)"),
    "zu9eg": ("xczu9eg-ffvb1156-2-e", 2520, 274080, "Zynq UltraScale+ ZU9EG"),
    "zu3eg": ("xczu3eg-sbva484-1-e", 360, 70560, "Zynq UltraScale+ ZU3EG (e.g. Ultra96-V2)"),
}


def part_preset(name: str):
    """(part number, DSP slices, LUTs, description) of a --part preset, or None for a part number."""
    return PARTS.get((name or "").lower())


# ---- the schedule on an abstract graph -------------------------------------------------------

@dataclass
class OpGraph:
    """Operations in a topological order: class, registered latency (whole cycles; 0 for a
    chained operator), chained delay (fraction of a cycle), cycles one instance is occupied per
    operation, and the operations whose results it reads."""

    cls: list
    lat: list
    chain: list
    occ: list
    preds: list
    ids: list | None = None   # IR node ids (None for a synthetic graph)

    def __len__(self):
        return len(self.cls)

    def duration(self, i: int) -> float:
        return self.lat[i] if self.lat[i] else self.chain[i]


@dataclass
class Schedule:
    start: list           # float: registered operations on whole cycles, chained ones within one
    finish: list
    length: float         # the last finish
    limits: dict          # class → instances allowed (None: unlimited)

    @property
    def cycles(self) -> int:
        return math.ceil(self.length - 1e-9)

    def in_flight(self, g: OpGraph) -> dict:
        """Class → the most operations occupying an instance in one cycle."""
        delta: dict[str, dict[int, int]] = {}
        for i in range(len(g)):
            s = math.floor(self.start[i] + 1e-9)
            d = delta.setdefault(g.cls[i], {})
            d[s] = d.get(s, 0) + 1
            d[s + g.occ[i]] = d.get(s + g.occ[i], 0) - 1
        peak = {}
        for c, d in delta.items():
            cur = best = 0
            for t in sorted(d):
                cur += d[t]
                best = max(best, cur)
            peak[c] = best
        return peak


def list_schedule(g: OpGraph, limits: dict | None = None) -> Schedule:
    """Resource-constrained list schedule of ``g`` (see the module docstring). ``limits``: class →
    instances (missing or None: unlimited)."""
    limits = {c: v for c, v in (limits or {}).items() if v is not None}
    for c, v in limits.items():
        if not isinstance(v, int) or v < 1:
            raise RbdgenError(f"a budget of {v!r} {c} operators: give a positive number of instances, or None")
    n = len(g)
    succs: list[list[int]] = [[] for _ in range(n)]
    left = [0] * n
    for i, ps in enumerate(g.preds):
        left[i] = len(ps)
        for p in ps:
            succs[p].append(i)
    prio = [0.0] * n
    for i in range(n - 1, -1, -1):
        prio[i] = g.duration(i) + max((prio[s] for s in succs[i]), default=0.0)
    ready_at = [0.0] * n
    start = [0.0] * n
    finish = [0.0] * n
    pending: list = []                        # (earliest cycle, -priority, op)
    ready = {c: [] for c in limits}           # (-priority, op)
    busy = {c: [] for c in limits}            # cycle each occupied instance frees
    lat, chain, cls = g.lat, g.chain, g.cls
    work: list[int] = []

    def release(j: int) -> None:
        r = ready_at[j]
        if cls[j] in limits:
            c = math.ceil(r - 1e-9) if lat[j] else math.floor(r + 1e-9)
            heapq.heappush(pending, (c, -prio[j], j))
        else:
            work.append(j)

    def place(i: int, s: float) -> None:
        start[i] = s
        f = s + (lat[i] if lat[i] else chain[i])
        finish[i] = f
        for j in succs[i]:
            if f > ready_at[j]:
                ready_at[j] = f
            left[j] -= 1
            if not left[j]:
                release(j)

    def drain() -> None:  # unlimited operations start as soon as their operands are ready
        while work:
            j = work.pop()
            r = ready_at[j]
            place(j, math.ceil(r - 1e-9) if lat[j] else r)

    for i in range(n):
        if not left[i]:
            release(i)
    drain()
    t = 0
    while pending or any(ready.values()):
        if not any(ready.values()):
            t = max(t, pending[0][0])
        progress = True
        while progress:
            progress = False
            while pending and pending[0][0] <= t:
                _, negp, j = heapq.heappop(pending)
                heapq.heappush(ready[cls[j]], (negp, j))
            for c, heap in ready.items():
                if not heap:
                    continue
                occ = busy[c]
                while occ and occ[0] <= t:
                    heapq.heappop(occ)
                while heap and len(occ) < limits[c]:
                    _, i = heapq.heappop(heap)
                    heapq.heappush(occ, t + g.occ[i])
                    place(i, float(t) if lat[i] else max(float(t), ready_at[i]))
                    drain()
                    progress = True
        t += 1
    return Schedule(start, finish, max(finish, default=0.0), dict(limits))


# ---- a kernel's graph ------------------------------------------------------------------------

def kernel_graph(kernel, model: Model, shared: bool) -> tuple[OpGraph, dict]:
    """The operations of ``kernel`` as the cost model prices them. ``shared``: the budgeted
    design (full-width multipliers, pipelined CORDIC units); else the unbudgeted one (each
    product sized by its constant, CORDICs inlined: busy for their whole latency).
    Returns the graph and the cost model's OpCost per class used."""
    kind, _ = _classify(kernel, model)
    full = model.mul()
    src: dict[int, int | None] = {}   # node id → index of the operation whose value it is
    g = OpGraph([], [], [], [], [], [])
    unit: dict = {}
    for n in kernel.live_nodes():
        k, x = kind[n.id]
        if k in ("zero", "const", "input"):
            src[n.id] = None
            continue
        if k == "wire":
            src[n.id] = src[x]
            continue
        if shared and x.cls == "mul":
            x = full
        preds = sorted({src[a.id] for a in n.args if src[a.id] is not None})
        occ = x.busy
        if x.cls == "sincos" and not shared:
            occ = max(1, x.cycles)   # inlined: its adder stages are combinational, held throughout
        src[n.id] = len(g.cls)
        g.cls.append(x.cls)
        g.lat.append(x.cycles)
        g.chain.append(x.chain)
        g.occ.append(max(1, occ))
        g.preds.append(preds)
        g.ids.append(n.id)
        unit.setdefault(x.cls, x)
    return g, unit


# ---- the budgeted design -----------------------------------------------------------------------

def epilogue_plan(kernel, mul_units: int | None) -> tuple[int, int]:
    """(II, elements per pipeline step) of the dense products' element loop on ``mul_units``
    shared multipliers (None: the unbudgeted design, one element per cycle on k multipliers):
    fewer than k multipliers stretch the II to ⌈k / M⌉; 2k or more process ⌊M / k⌋ elements of a
    row per step (``UNROLL factor``); from a row's k·m on, whole rows per step (``r·m``: the row
    loop pipelined and unrolled by r, a product's last step may hold fewer rows); and with
    k multipliers for every element of every product, all of them in one step, the products side
    by side (their loops unrolled; only where no product reads another's output). Whole rows
    need every product of one shape (n, m). One plan for all of a kernel's products (the largest
    k, the smallest row)."""
    if mul_units is None or not kernel.post:
        return 1, 1
    post = kernel.post
    k = max(mm.k for mm in post)
    m = min(mm.m for mm in post)
    if mul_units < k:
        return math.ceil(k / mul_units), 1
    per = mul_units // k
    if per <= m or len({(mm.n, mm.m) for mm in post}) > 1:
        return 1, max(1, min(m, per))
    total = sum(mm.n * mm.m for mm in post)
    outs = {mm.out for mm in post}
    if per >= total and not any(mm.a in outs or mm.b in outs for mm in post):
        return 1, total
    return 1, min(per // m, post[0].n) * m


def epilogue_all_at_once(kernel, per: int) -> bool:
    """Whether ``per`` elements a step is every element of every product: one step, the
    products side by side (see :func:`epilogue_plan`)."""
    return len(kernel.post) > 1 and per == sum(mm.n * mm.m for mm in kernel.post)


def epilogue_steps(kernel, per: int) -> list[list[tuple]]:
    """The elements ``(product index, i, j)`` of each pipeline step, in order, for ``per``
    elements a step (:func:`epilogue_plan`): ``per`` elements of a row, or ``per / m`` whole
    rows of a product, or every element of every product in one step."""
    if epilogue_all_at_once(kernel, per):
        return [[(p, i, j) for p, mm in enumerate(kernel.post) for i in range(mm.n) for j in range(mm.m)]]
    steps = []
    for p, mm in enumerate(kernel.post):
        if per <= mm.m:
            for i in range(mm.n):
                for j0 in range(0, mm.m, per):
                    steps.append([(p, i, j) for j in range(j0, min(mm.m, j0 + per))])
        else:
            rows = per // mm.m
            for i0 in range(0, mm.n, rows):
                steps.append([(p, i, j) for i in range(i0, min(mm.n, i0 + rows)) for j in range(mm.m)])
    return steps


def _epilogue(kernel, model: Model, mul_units: int | None):
    """(cycles, multipliers, plan) of the dense products (see :func:`epilogue_plan`): each
    product's steps ``ii`` cycles apart and its pipeline's depth after its last (the products one
    after the other), or one step for all of them side by side."""
    mul, add = model.mul(), model.add()
    ii, u = plan = epilogue_plan(kernel, mul_units)
    if not kernel.post:
        return 0, 0, plan
    if epilogue_all_at_once(kernel, u):  # one step: the deepest product's pipeline after it
        k = max(mm.k for mm in kernel.post)
        return ii + mul.cycles + math.ceil(k * add.chain - 1e-9) + add.cycles * k - 1, math.ceil(k / ii) * u, plan
    cycles = mult = 0
    for mm in kernel.post:
        it = mul.cycles + math.ceil(mm.k * add.chain - 1e-9) + add.cycles * mm.k
        steps = mm.n * math.ceil(mm.m / u) if u <= mm.m else math.ceil(mm.n / (u // mm.m))
        cycles += steps * ii + it - 1
        mult = max(mult, math.ceil(mm.k / ii) * min(u, mm.n * mm.m))
    return cycles, mult, plan


def min_dsp(kernel, numtype) -> int:
    """The smallest DSP budget ``kernel`` can be built with: one multiplier and, if it has
    angles, one CORDIC unit."""
    model = Model(numtype, 250.0)
    kind, folded = _classify(kernel, model)
    has_mul = any(k == "op" and x.cls == "mul" for k, x in kind.values()) or bool(kernel.post)
    return (model.mul().dsp if has_mul else 0) + (model.sincos().dsp if folded["sincos_units"] else 0)


def budget_cost(kernel, numtype, clock_mhz: float, dsp_budget: int, *, dividers: int | None = None,
                adders: int | None = None, graph=None, memo: dict | None = None, divider: str = "tool") -> dict:
    """The list-scheduled design of ``kernel`` within ``dsp_budget`` DSP48E2 slices: see
    :func:`budget_design`, whose figures these are."""
    return budget_design(kernel, numtype, clock_mhz, dsp_budget, dividers=dividers, adders=adders, graph=graph,
                         memo=memo, divider=divider)[0]


def budget_design(kernel, numtype, clock_mhz: float, dsp_budget: int, *, dividers: int | None = None,
                  adders: int | None = None, graph=None, memo: dict | None = None, divider: str = "tool"):
    """The list-scheduled design of ``kernel`` within ``dsp_budget`` DSP48E2 slices (see the module
    docstring): cycles, latency, DSPs, instances per class, the back-to-back II, LUT/FF
    estimates, and the pragma limits the generated source carries. ``dividers``/``adders``:
    optional limits on those classes too (unlimited by default). ``graph``: a cached
    ``kernel_graph(kernel, model, True)``; ``memo``: a dict kept between calls for the same
    kernel, type, clock and divider/adder limits (a sweep over budgets reuses its schedules);
    ``divider``: the datapath's divider (:data:`rbdgen.targets.hls.cost.DIVIDERS`).

    Returns (the figures, the graph, the schedule): the graph's operations (``OpGraph.ids``: IR
    node ids) start and finish where the schedule says, which is what the Verilog target's
    shared design binds to its operators (:mod:`rbdgen.targets.verilog.emit`)."""
    if numtype.kind != "fixed":
        raise RbdgenError("--dsp-budget needs an ap_fixed datapath (--fixed W,I): floating-point adders use DSPs "
                          "too and are not scheduled under a budget")
    if isinstance(dsp_budget, bool) or not isinstance(dsp_budget, int) or dsp_budget < 1:
        raise RbdgenError(f"--dsp-budget must be a positive number of DSP slices, got {dsp_budget!r}")
    model = Model(numtype, clock_mhz, divider)
    g, unit = graph if graph is not None else kernel_graph(kernel, model, True)
    need = min_dsp(kernel, numtype)
    if dsp_budget < need:
        raise RbdgenError(f"--dsp-budget {dsp_budget}: kernel {kernel.name} needs at least {need} DSP slices at "
                          f"{numtype.describe()} (one {model.mul().dsp}-slice multiplier"
                          + (f" and one CORDIC unit of {model.sincos().dsp}" if "sincos" in unit else "") + ")")
    mul_dsp = model.mul().dsp
    sc_dsp = model.sincos().dsp
    n_of = {c: g.cls.count(c) for c in CLASSES}
    n_mul_all = n_of["mul"] + sum(mm.n * mm.m * mm.k for mm in kernel.post)
    angles = n_of["sincos"]
    cands = sorted({s for s in (1, 2, 4, 8, angles) if s <= angles}) if angles else [0]
    memo = {} if memo is None else memo
    # enough multipliers for the datapath's every product, or for every element of the dense products at once
    m_cap = max(n_of["mul"], max((mm.k for mm in kernel.post), default=0) * sum(mm.n * mm.m for mm in kernel.post))

    def design(S: int, M: int):
        if (S, M) not in memo:
            sch = list_schedule(g, {"mul": M, "sincos": S or None, "div": dividers, "add": adders})
            used = sch.in_flight(g)
            epi_cycles, epi_mul, plan = _epilogue(kernel, model, M)
            mul_units = max(used.get("mul", 0), epi_mul)
            sc_units = used.get("sincos", 0)
            memo[(S, M)] = (sch.cycles + epi_cycles, mul_units * mul_dsp + sc_units * sc_dsp, S, M, sch, used,
                            mul_units, sc_units, epi_cycles, plan)
        return memo[(S, M)]

    best = None
    for S in cands:
        M = (dsp_budget - S * sc_dsp) // mul_dsp
        if M < 1 and n_mul_all:
            continue
        d = design(S, max(1, min(M, m_cap)))
        if best is None or d[:2] < best[:2]:
            best = d
    # the fewest multipliers that keep that length (a budget is a ceiling, not a target): bisection
    S, M = best[2], best[3]
    lo, hi = 1, M
    for (s_, m_), d in memo.items():  # what earlier calls of a sweep already know narrows it
        if s_ == S:
            if d[0] <= best[0]:
                hi = min(hi, m_)
            elif m_ < hi:
                lo = max(lo, m_ + 1)
    lo = min(lo, hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if design(S, mid)[0] <= best[0]:
            hi = mid
        else:
            lo = mid + 1
    if design(S, hi)[:2] <= best[:2]:
        best = design(S, hi)
    cycles, dsp, S, M, sch, used, mul_units, sc_units, epi_cycles, plan = best
    units = {"mul": mul_units, "sincos": sc_units, "div": used.get("div", 0), "add": used.get("add", 0)}
    # back-to-back states through the same operators (a modulo schedule; no recurrence between states)
    ii = 1
    for c, count in (("mul", n_mul_all), ("sincos", n_of["sincos"]), ("div", n_of["div"])):
        if count and units[c]:
            busy = unit[c].busy if c in unit else 1
            ii = max(ii, math.ceil(count * busy / units[c]))
    lut, ff = _area(g, sch, model, unit, units, n_of, cycles)
    return ({
        "dsp_budget": dsp_budget, "dsp": int(dsp), "latency_cycles": int(cycles),
        "latency_us": cycles * model.period / 1000.0, "ii": int(ii),
        "mul_units": units["mul"], "sincos_units": units["sincos"], "div_units": units["div"],
        "add_units": units["add"], "mul_dsp": mul_dsp, "sincos_dsp": sc_dsp, "epilogue_cycles": int(epi_cycles),
        "lut": int(lut), "ff": int(ff), "clock_mhz": float(clock_mhz), "type": numtype.describe(),
        "limit_mul": mul_units if n_mul_all else None, "limit_sincos": sc_units if angles else None,
        "epilogue_plan": plan,
    }, g, sch)


def _area(g: OpGraph, sch: Schedule, model: Model, unit: dict, units: dict, n_of: dict,
          cycles: int) -> tuple[int, int]:
    """LUTs and flip-flops of the shared design: the operators' own logic (as the cost model
    prices one instance), the peak adders in one cycle, an operand multiplexer per shared input
    (a W-bit s:1 mux, ⌈(s − 1)/3⌉ LUT6 per bit, s the straight-line operations an instance
    serves; the product loop's indexed reads are not modelled, as in hls_cost), and a W-bit
    register for every value held across the busiest cycle boundary."""
    W = model.nt.W
    lut = ff = 0
    for c in ("mul", "sincos", "div"):
        if units[c] and c in unit:
            lut += units[c] * unit[c].lut
            ff += units[c] * unit[c].ff
            lut += mux_lut(W, units[c], n_of[c])  # the straight-line operations (as hls_cost)
    if "add" in unit:
        lut += units["add"] * unit["add"].lut
    # registers: a value is held from the cycle it is ready until its last reader starts
    last = [math.floor(sch.start[i] + 1e-9) for i in range(len(g))]
    for i, ps in enumerate(g.preds):
        s = math.floor(sch.start[i] + 1e-9)
        for p in ps:
            if s > last[p]:
                last[p] = s
    delta = [0] * (cycles + 3)
    for i in range(len(g)):
        born = math.ceil(sch.finish[i] - 1e-9)
        if born <= last[i]:
            delta[min(born, len(delta) - 1)] += 1
            delta[min(last[i] + 1, len(delta) - 1)] -= 1
    held = peak = 0
    for d in delta:
        held += d
        peak = max(peak, held)
    return lut, ff + W * peak
