"""Parallel prefix scans over a kinematic tree, written once for any associative operator.

Rigid-body recursions are *scans*: a body's velocity is its parent's carried through the joint,
so the value at body i is the ordered combination of one element per body on the path from the
root to i (Yang, Wu & Pan; Lathrop). With an associative operator ``op(x, y)`` ("x, then y", x
nearer the root) the same result comes from several evaluation orders:

``sequential``
    out[i] = op(out[parent[i]], e[i]), body after body: n − 1 operator calls, depth = the tree's
    depth (the classical recursion).
``hillis_steele``
    pointer jumping, the tree form of Hillis & Steele's scan: in round k every body combines its
    value with the one 2^k levels up, so after ⌈log₂(depth + 1)⌉ rounds every body holds its
    whole root path. Branches need no special case — siblings point at the same ancestor and
    share its partial results. O(n log n) operator calls, depth ⌈log₂(depth + 1)⌉.
``blelloch``
    work-efficient (Blelloch's up-sweep / down-sweep exclusive scan, with the identity) on every
    *path* of a path decomposition of the tree (a body continues its parent's path if it is the
    parent's first child, otherwise it starts a new one): the paths are independent segments of a
    segmented scan, scanned side by side; a path that hangs off another is then completed with
    one more operator call per body (one round per level of path nesting: 1 for a quadruped,
    2 for a humanoid's hands on its arms on its torso). O(n) operator calls, depth ≈ 2 log₂(path
    length) + nesting.

For the backward (force) pass, :func:`subtree_sums` sums a value over every body's subtree
with a balanced tree of additions (subtrees are contiguous in depth-first order, so each is a
range covered by at most 2 log₂ n aligned blocks): depth O(log n), no subtraction, so nothing
cancels.

Nothing here knows what is being combined: the NumPy reference (:mod:`rbdgen.reference.scan`)
passes arrays, the code generator (:mod:`rbdgen.algorithms.scan`) passes traced values, and
``round_hook(label, i)`` lets the tracer tag each operator call with its round and body.
"""
from __future__ import annotations

from typing import Callable, Sequence

METHODS = ("sequential", "hillis_steele", "blelloch")


def with_world(parent: Sequence[int]) -> list[int]:
    """Parents with a world node 0 in front (bodies shift by one): the root's element of a scan
    that starts from the world's state (gravity, zero velocity)."""
    return [-1] + [p + 1 for p in parent]


def _check(parent: Sequence[int]) -> None:
    for i, p in enumerate(parent):
        if not -1 <= p < i:
            raise ValueError(f"parent[{i}] = {p}: bodies must be in topological order (parent < child, -1 for a root)")


def _call(op, hook, label, i, x, y):
    if hook is not None:
        hook(label, i)
    return op(x, y)


def tree_scan(elems: Sequence, parent: Sequence[int], op: Callable, method: str = "hillis_steele",
              identity: Callable | None = None, round_hook: Callable | None = None) -> list:
    """Inclusive scan along root paths: ``out[i] = e[r] ⊕ … ⊕ e[parent[i]] ⊕ e[i]`` where r is
    i's root and ``x ⊕ y = op(x, y)``. ``identity()`` returns a fresh identity element (needed
    by ``blelloch`` only, to pad and to seed the exclusive scan)."""
    parent = list(parent)
    _check(parent)
    if len(elems) != len(parent):
        raise ValueError(f"{len(elems)} elements for {len(parent)} bodies")
    if method == "sequential":
        out = list(elems)
        for i, p in enumerate(parent):
            if p >= 0:
                out[i] = _call(op, round_hook, "sequential", i, out[p], elems[i])
        return out
    if method == "hillis_steele":
        return _hillis_steele(list(elems), parent, op, round_hook)
    if method == "blelloch":
        if identity is None:
            raise ValueError("the blelloch scan needs the operator's identity")
        return _blelloch_tree(list(elems), parent, op, identity, round_hook)
    raise ValueError(f"unknown scan method {method!r} (one of {', '.join(METHODS)})")


def _hillis_steele(cur, parent, op, hook):
    jump = list(parent)
    k = 0
    while any(j >= 0 for j in jump):
        label = f"round {k} (combine with the value {1 << k} level{'s' if k else ''} up)"
        new = list(cur)
        for i, j in enumerate(jump):
            if j >= 0:
                new[i] = _call(op, hook, label, i, cur[j], cur[i])
        jump = [jump[j] if j >= 0 else -1 for j in jump]
        cur = new
        k += 1
    return cur


def paths(parent: Sequence[int]) -> list[list[int]]:
    """A path decomposition: a body continues its parent's path when it is the parent's first
    (lowest-index) child, otherwise it starts a new path. Paths are listed by their head."""
    first_child: dict[int, int] = {}
    for i, p in enumerate(parent):
        if p >= 0:
            first_child.setdefault(p, i)
    path_of, out = {}, []
    for i, p in enumerate(parent):
        if p >= 0 and first_child[p] == i:
            path_of[i] = path_of[p]
            out[path_of[i]].append(i)
        else:
            path_of[i] = len(out)
            out.append([i])
    return out


def blelloch_exclusive(xs: list, op: Callable, identity: Callable, hook=None, tag=None) -> list:
    """Blelloch's exclusive scan of a list (padded to a power of two with the identity):
    ``out[k] = x[0] ⊕ … ⊕ x[k−1]``, ``out[0]`` = identity. 2(n − 1) operator calls."""
    n = len(xs)
    size = 1
    while size < n:
        size *= 2
    a = list(xs) + [identity() for _ in range(size - n)]
    tag = tag or (lambda k: k)
    d = 1
    while d < size:  # up-sweep: a[k + 2d − 1] = a[k + d − 1] ⊕ a[k + 2d − 1]
        for k in range(0, size, 2 * d):
            r = k + 2 * d - 1
            if k < n:  # a left half that is all padding adds nothing
                a[r] = _call(op, hook, f"up-sweep, span {2 * d}", tag(min(r, n - 1)), a[k + d - 1], a[r])
        d *= 2
    a[size - 1] = identity()
    d = size // 2
    while d >= 1:  # down-sweep: left ← parent prefix; right ← parent prefix ⊕ left sum
        for k in range(0, size, 2 * d):
            left, right = k + d - 1, k + 2 * d - 1
            if k >= n:
                continue  # the left half is all padding: the right one keeps the prefix as is
            t = a[left]
            a[left] = a[right]
            a[right] = _call(op, hook, f"down-sweep, span {2 * d}", tag(min(right, n - 1)), a[right], t)
        d //= 2
    return a[:n]


def _blelloch_tree(elems, parent, op, identity, hook):
    ps = paths(parent)
    local = [None] * len(elems)
    for path in ps:  # the segments: independent, side by side
        xs = [elems[i] for i in path]
        excl = blelloch_exclusive(xs, op, identity, hook, tag=lambda k, path=path: path[k])
        for k, i in enumerate(path):
            local[i] = _call(op, hook, "inclusive", i, excl[k], xs[k]) if k else xs[k]
    out = [None] * len(elems)
    # completion: a path hanging off body p gets out[p] ⊕ (its own prefix), one round per nesting
    level = {}
    for path in ps:
        h = path[0]
        p = parent[h]
        level[h] = 0 if p < 0 else level[_head(ps, p)] + 1
        for i in path:
            out[i] = local[i] if p < 0 else _call(op, hook, f"path completion, nesting {level[h]}", i, out[p], local[i])
    return out


def _head(ps, i):
    for path in ps:
        if i in path:
            return path[0]
    raise KeyError(i)


def preorder(parent: Sequence[int]) -> list[int]:
    """Bodies in depth-first preorder (children by index): every subtree is a contiguous run."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parent):
        children.setdefault(p, []).append(i)
    out, stack = [], list(reversed(children.get(-1, [])))
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(reversed(children.get(i, [])))
    return out


def subtree_sums(values: Sequence, parent: Sequence[int], add: Callable, round_hook: Callable | None = None) -> list:
    """``out[i]`` = the sum of ``values`` over i's subtree, by a balanced tree of ``add`` calls:
    bodies in depth-first order make each subtree a range; the ranges are built from aligned
    power-of-two blocks whose sums are shared, and a range's blocks are added pairwise.
    Depth ⌈log₂ n⌉ + ⌈log₂(2 log₂ n)⌉ additions; no subtraction."""
    parent = list(parent)
    _check(parent)
    order = preorder(parent)
    pos = {b: k for k, b in enumerate(order)}
    n = len(order)
    size = [1] * n
    for i in reversed(range(n)):  # children after parents: each subtree's size is complete when added
        if parent[i] >= 0:
            size[parent[i]] += size[i]
    blocks: dict[tuple[int, int], object] = {}  # (level, index) → sum of order[index·2^level : (index+1)·2^level]

    def block(level, idx):
        key = (level, idx)
        if key not in blocks:
            if level == 0:
                blocks[key] = values[order[idx]]
            else:
                if round_hook is not None:
                    round_hook(f"block sums, span {1 << level}", order[min(n - 1, (idx + 1) * (1 << level) - 1)])
                blocks[key] = add(block(level - 1, 2 * idx), block(level - 1, 2 * idx + 1))
        return blocks[key]

    out = [None] * n
    for i in range(n):
        lo, hi = pos[i], pos[i] + size[i]
        parts = []
        level = 0
        while lo < hi:  # canonical decomposition of [lo, hi) into aligned blocks
            if lo & 1:
                parts.append(block(level, lo))
                lo += 1
            if hi & 1 and hi > lo:
                hi -= 1
                parts.append(block(level, hi))
            lo //= 2
            hi //= 2
            level += 1
        while len(parts) > 1:  # pairwise: depth ⌈log₂ len(parts)⌉
            if round_hook is not None:
                round_hook("subtree sums", i)
            parts = [add(parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k] for k in range(0, len(parts), 2)]
        out[i] = parts[0]
    return out
