"""Level scheduling of a kernel for cooperative execution (several threads on one state).

Backend-neutral: the schedule knows nothing about RNEA or CUDA, only the kernel's dependency
graph and its blocks. A *task* is a maximal run of consecutive statements (in the kernel's
topological creation order) that share a :class:`~rbdgen.ir.graph.Block` — the work of one body
in one phase, or of one gradient column on one body. Tasks form a DAG; a task's *stage* is the
length of the longest chain of tasks before it, so tasks of one stage never depend on each
other and may run on different threads between two barriers. Within a stage, tasks go to
``lanes`` threads by longest-processing-time-first (each to the least loaded lane), so the
barrier waits as little as possible for the slowest lane.

The number of stages is the number of barriers; for a serial chain it is ~2 per body (forward
and backward sweeps); the columns of a gradient and the branches of a tree (legs, arms) share
stages, which is where several threads per state pay off.
"""
from __future__ import annotations

from dataclasses import dataclass

from .graph import Kernel, Node


@dataclass
class Schedule:
    """``part[node_id]`` → index of the (stage, lane) piece that computes the node; pieces are
    numbered stage-major and only non-empty ones exist. ``pieces[p] = (stage, lane)``."""

    lanes: int
    n_stages: int
    part: dict
    pieces: list
    width: int          # most tasks in one stage (the parallelism on offer)
    ops_per_stage: list  # ops of the busiest lane in each stage (the stage's latency)
    lane_loads: list = None  # per stage, the ops of each lane (0 where a lane has none)

    @property
    def critical_ops(self) -> int:
        return sum(self.ops_per_stage)


def level_schedule(kernel: Kernel, max_lanes: int = 64) -> Schedule:
    ops = [n for n in kernel.live_nodes() if n.op not in ("const", "input")]
    # tasks: runs of consecutive ops with the same block
    task_of: dict[int, int] = {}
    tasks: list[list[Node]] = []
    prev_block = object()
    for n in ops:
        if not tasks or n.block != prev_block:
            tasks.append([])
            prev_block = n.block
        tasks[-1].append(n)
        task_of[n.id] = len(tasks) - 1
    stage = [0] * len(tasks)
    for t, members in enumerate(tasks):
        s = 0
        for n in members:
            for a in n.args:
                u = task_of.get(a.id)
                if u is not None and u != t:
                    s = max(s, stage[u] + 1)
        stage[t] = s
    n_stages = max(stage, default=-1) + 1
    by_stage: list[list[int]] = [[] for _ in range(n_stages)]
    for t, s in enumerate(stage):
        by_stage[s].append(t)
    width = max((len(ts) for ts in by_stage), default=0)
    lanes = max(1, min(max_lanes, width))
    part: dict[int, int] = {}
    pieces: list[tuple[int, int]] = []
    ops_per_stage = []
    lane_loads: list[list[int]] = []
    for s, ts in enumerate(by_stage):
        load = [0] * lanes
        lane_of: dict[int, int] = {}
        # longest first; ties by creation order so the schedule is deterministic
        for t in sorted(ts, key=lambda t: (-len(tasks[t]), t)):
            lane = min(range(lanes), key=lambda x: (load[x], x))
            lane_of[t] = lane
            load[lane] += len(tasks[t])
        ops_per_stage.append(max(load))
        lane_loads.append(load)
        piece_of_lane = {}
        for lane in sorted(set(lane_of.values())):
            piece_of_lane[lane] = len(pieces)
            pieces.append((s, lane))
        for t in ts:
            for n in tasks[t]:
                part[n.id] = piece_of_lane[lane_of[t]]
    return Schedule(lanes, n_stages, part, pieces, width, ops_per_stage, lane_loads)


@dataclass(frozen=True)
class CriticalPath:
    """The longest dependency chain of a kernel when every op whose operands are ready runs at
    once (unlimited processors): ``depth`` ops, of which ``mul`` multiplies, ``add`` adds or
    subtractions (negations count as adds) and ``other`` divisions, square roots or sines. The
    mul/add split is the one Lathrop counts as multiply and add *steps*. Sums are evaluated in the
    order the IR holds them (a dot product is a chain, not a balanced tree)."""

    depth: int
    mul: int
    add: int
    other: int


def critical_path(kernel: Kernel) -> CriticalPath:
    from .ops import OPS

    best: dict[int, tuple] = {}  # node id → (depth, mul, add, other) of the longest chain ending there
    zero = (0, 0, 0, 0)
    top = zero
    for n in kernel.live_nodes():
        if n.op in ("const", "input"):
            best[n.id] = zero
            continue
        d, mu, ad, ot = max((best[a.id] for a in n.args), default=zero)
        cls = OPS[n.op].cost
        here = (d + 1, mu + (cls == "mul"), ad + (cls == "add"), ot + (cls not in ("mul", "add")))
        best[n.id] = here
        top = max(top, here)
    d, mu, ad, ot = top
    # a post-product (scale · A @ B, at most k terms per entry: those over B's nonzero spans):
    # its multiplies side by side, then a chain of adds (as op_counts counts its depth)
    k = max((mm.depth for mm in kernel.post), default=0)
    if k:
        d, mu, ad = d + k, mu + 1, ad + k - 1
    return CriticalPath(d, mu, ad, ot)
