"""Spatial algebra over traced :class:`~rbdgen.ir.graph.Value` scalars.

Vectors are lists of 6 Values (motion ``[ω; v]``, force ``[n; f]``); a transform is a pair
``(E, r)`` (``X = plux(E, r)``) applied blockwise, which costs fewer multiplies than a 6×6
product even before zero pruning; inertias are 6×6 lists. Zero pruning and constant folding
happen in the graph, never here: with a non-folding graph the same code gives the dense count.
"""
from __future__ import annotations

from ..ir.graph import Graph, Value


def dot(g: Graph, a, b, tree: bool = False) -> Value:
    """Σ aₖ·bₖ. Summed left to right (a compiler contracts the chain into multiply-adds: n
    instructions, n dependent steps), or with ``tree`` pairwise, ((a₀b₀ + a₁b₁) + (a₂b₂ + a₃b₃)) + …:
    the same operations, ⌈log₂ n⌉ + 1 dependent steps instead of n, and more instructions (a
    product of each pair is not contracted). For the sums on a kernel's critical path, e.g. ABA's
    second forward pass (docs/performance.md §24)."""
    if not g.fold:
        acc = None
        for x, y in zip(a, b):
            t = x * y
            acc = t if acc is None else acc + t
        return acc
    # folded, a product with a structural zero is zero and adding it returns the sum unchanged;
    # skipping those pairs here builds the same graph without the calls (most pairs of a spatial
    # product are such zeros)
    # (the zero is made first, as the sum's start, so that the graph's nodes are numbered as
    # they were when the sum started from it; a sum of one term is that term, 0 + t being t)
    zero = g.const(0.0)
    acc = None
    terms = []
    for x, y in zip(a, b):
        if (x.node.value == 0.0 if isinstance(x, Value) else x == 0.0) or \
                (y.node.value == 0.0 if isinstance(y, Value) else y == 0.0):
            continue
        if tree:
            terms.append(x * y)
        elif acc is None:
            acc = g.lift(x * y)
        else:
            acc = acc + x * y
    if not tree or not terms:
        return zero if acc is None else acc
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)] + terms[len(terms) - len(terms) % 2:]
    return terms[0]


def cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def mat3_vec(g, E, x):
    return [dot(g, E[k], x) for k in range(3)]


def mat3T_vec(g, E, x):
    return [dot(g, [E[0][k], E[1][k], E[2][k]], x) for k in range(3)]


def vadd(a, b):
    return [x + y for x, y in zip(a, b)]


def vsub(a, b):
    return [x - y for x, y in zip(a, b)]


def vscale(s, a):
    return [s * x for x in a]


class AxisRotation:
    """A revolute joint's own rotation E_J = R_Jᵀ about a coordinate axis ±e_k of its frame:
    the identity on axis k and Q = [[c, s], [−s, c]] on the plane of the other two, rows and
    columns (i, j) = (k+1, k+2) mod 3 for +e_k, (k+2, k+1) for −e_k (the rotation by −q).

    Congruences EᵀPE by it need only the plane's part, by the double angle: with σ = s² and
    cs = c·s (cos 2q = 1 − 2σ, sin 2q = 2cs; per joint, shared by every use) a symmetric 3×3
    costs 8 multiplies (4 for its plane's 2×2, 4 for the column beside it) where EᵀPE with E
    linear in (c, s) costs 25-40."""

    def __init__(self, k: int, sign: float, c, s):
        self.k = k
        self.i, self.j = ((k + 1) % 3, (k + 2) % 3) if sign > 0 else ((k + 2) % 3, (k + 1) % 3)
        self.c, self.s = c, s

    # σ and cs are formed where a congruence first needs them (the graph shares them after):
    # formed with the transform, in the forward pass, they would stay live through it to the
    # backward pass, two more values per joint in registers (on a GPU thread, aba's 198
    # registers and a spill in contact_terms instead of ≤ 168 and none)
    @property
    def sig(self):
        return self.s * self.s

    @property
    def cs(self):
        return self.c * self.s

    def vec(self, x):
        """Eᵀx (a column of P beside the plane) or xᵀE (a row): (c x_i − s x_j, s x_i + c x_j)."""
        i, j, c, s = self.i, self.j, self.c, self.s
        out = list(x)
        out[i], out[j] = c * x[i] - s * x[j], s * x[i] + c * x[j]
        return out

    def _plane(self, a, b, e, d):
        """QᵀPQ of the plane's 2×2 P = [[a, b], [e, d]]: a' = a − δ, d' = d + δ, b' = b + w,
        e' = e + w, δ = (a − d) σ + (b + e) cs, w = (a − d) cs − (b + e) σ (the antisymmetric
        part b − e is the rotation's invariant)."""
        m, bpe = a - d, b + e
        delta = m * self.sig + bpe * self.cs
        w = m * self.cs - bpe * self.sig
        return a - delta, b + w, e + w, d + delta

    def sym(self, P):
        """EᵀPE for a symmetric 3×3 P (the result symmetric): with b = e, δ = m σ + 2b cs and
        b' = b + (m cs − 2b σ), m = a − d."""
        i, j, k = self.i, self.j, self.k
        a, b, d = P[i][i], P[i][j], P[j][j]
        m, b2 = a - d, b + b
        delta = m * self.sig + b2 * self.cs
        col = self.vec([P[n][k] for n in range(3)])
        out = [[None] * 3 for _ in range(3)]
        out[i][i], out[j][j], out[k][k] = a - delta, d + delta, P[k][k]
        out[i][j] = out[j][i] = b + (m * self.cs - b2 * self.sig)
        for n in (i, j):
            out[n][k] = out[k][n] = col[n]
        return out

    def gen(self, P):
        """EᵀPE for a general 3×3 P."""
        i, j, k = self.i, self.j, self.k
        out = [[None] * 3 for _ in range(3)]
        out[i][i], out[i][j], out[j][i], out[j][j] = self._plane(P[i][i], P[i][j], P[j][i], P[j][j])
        col = self.vec([P[n][k] for n in range(3)])
        row = self.vec(P[k])
        for n in (i, j):
            out[n][k], out[k][n] = col[n], row[n]
        out[k][k] = P[k][k]
        return out


class XForm:
    """Plücker transform X = plux(E, r): parent motion coordinates → child.

    ``split``: where X = X_J·X_tree with X_J a rotation about an axis of the joint's frame and
    X_tree's rotation a signed permutation, the pair (:class:`AxisRotation`, X_tree as an
    XForm of constants): congruences then rotate by the joint first (by the double angle) and
    carry by X_tree second, which costs half the multiplies of one by E = E_J·E_tree."""

    def __init__(self, E, r, split=None):
        self.E = E  # 3×3 Values
        self.r = r  # 3 Values
        self.split = split

    def motion(self, g, m):
        """X·m = [E ω; E (v − r × ω)]"""
        w, v = m[:3], m[3:]
        return mat3_vec(g, self.E, w) + mat3_vec(g, self.E, vsub(v, cross(self.r, w)))

    def motion_inv(self, g, m):
        """X⁻¹·m = [Eᵀ ω; Eᵀ v + r × Eᵀ ω]: child motion coordinates back in the parent's"""
        w = mat3T_vec(g, self.E, m[:3])
        return w + vadd(mat3T_vec(g, self.E, m[3:]), cross(self.r, w))

    def force_T(self, g, f):
        """Xᵀ·f = [Eᵀ n + r × Eᵀ f; Eᵀ f]"""
        n, fl = f[:3], f[3:]
        fl2 = mat3T_vec(g, self.E, fl)
        return vadd(mat3T_vec(g, self.E, n), cross(self.r, fl2)) + fl2

    def force(self, g, f):
        """X*·f = X⁻ᵀ·f = [E (n − r × f); E f]: force coordinates carried like the motion ones"""
        n, fl = f[:3], f[3:]
        return mat3_vec(g, self.E, vsub(n, cross(self.r, fl))) + mat3_vec(g, self.E, fl)

    def then(self, g, X2):
        """X₂·X₁ (this transform first): plux(E₂E₁, r₁ + E₁ᵀ r₂)"""
        E = mat_mat(g, X2.E, self.E)
        return XForm(E, vadd(self.r, mat3T_vec(g, self.E, X2.r)))

    def congruence(self, g, M):
        """Xᵀ M X for a symmetric 6×6 M, by blocks: X = diag(E, E)·[[1, 0], [−r×, 1]], so the
        rotation acts on each 3×3 block (EᵀAE, EᵀBE, EᵀCE) and the shift multiplies by r×,
        whose entries are the joint's constant offset for a revolute joint. With
        M = [[A, B], [Bᵀ, C]], K = B′ r×, N = C′ r×:
        A″ = A′ − K − Kᵀ − r× N,  B″ = B′ + r× C′,  C″ = C′.  About three quarters of the
        multiplies of the 6×6 products. With :attr:`split`, the joint's rotation first, by
        blocks (:class:`AxisRotation`), then X_tree's congruence."""
        blk = lambda r0, c0: [[M[r0 + a][c0 + b] for b in range(3)] for a in range(3)]  # noqa: E731
        if self.split is not None:
            rot, tree = self.split
            A, B, C = rot.sym(blk(0, 0)), rot.gen(blk(0, 3)), rot.sym(blk(3, 3))
            return tree.congruence(g, [A[a] + B[a] for a in range(3)] + [[B[b][a] for b in range(3)] + C[a] for a in range(3)])
        E, r = self.E, self.r
        Et = transpose(E)
        A = mat_mat(g, Et, mat_mat(g, blk(0, 0), E))
        B = mat_mat(g, Et, mat_mat(g, blk(0, 3), E))
        C = mat_mat(g, Et, mat_mat(g, blk(3, 3), E))
        zero = g.const(0.0)
        rx = [[zero, -r[2], r[1]], [r[2], zero, -r[0]], [-r[1], r[0], zero]]
        K = mat_mat(g, B, rx)
        N = mat_mat(g, C, rx)
        rN = mat_mat(g, rx, N)
        rC = mat_mat(g, rx, C)
        out = [[None] * 6 for _ in range(6)]
        for a in range(3):
            for b in range(3):
                if b >= a:
                    out[a][b] = out[b][a] = A[a][b] - K[a][b] - K[b][a] - rN[a][b]
                    out[3 + a][3 + b] = out[3 + b][3 + a] = C[a][b]
                out[a][3 + b] = out[3 + b][a] = B[a][b] + rC[a][b]
        return out


class Inertia:
    """A rigid-body inertia, or a sum of them, or its rate of change, by its ten parameters:
    mass m, first moment h = m·c and rotational inertia Ī about the frame's origin (3×3,
    symmetric), i.e. the 6×6 matrix [[Ī, h×], [h×ᵀ, m·1]]. Carrying one to a parent frame costs
    about a third of the 6×6 congruence XᵀIX, and applying it two thirds of a 6×6 product."""

    def __init__(self, m, h, Ib):
        self.m, self.h, self.Ib = m, h, Ib

    @classmethod
    def from_matrix(cls, M):
        return cls(M[3][3], [M[2][4], M[0][5], M[1][3]], [row[:3] for row in M[:3]])

    def apply(self, g, x):
        """I·x = [Ī ω + h × v; m v − h × ω]"""
        w, u = x[:3], x[3:]
        return vadd(mat3_vec(g, self.Ib, w), cross(self.h, u)) + vsub(vscale(self.m, u), cross(self.h, w))

    def body_force(self, g, v, a):
        """I·a + v ×* I·v, the force a body of this inertia needs to move with velocity v = [ω; u]
        and acceleration a = [ω̇; u̇], rearranged so that I·v is never formed: with the origin's
        classical acceleration a_o = u̇ + ω × u (the terms m·u × u that the product form carries
        cancel, and ω × (h × u) + (h × ω) × u = h × (ω × u) by Jacobi's identity),

            n = Ī ω̇ + ω × (Ī ω) + h × a_o,    f = m a_o − h × ω̇ + ω × (ω × h)

        the Newton-Euler equations about the frame's origin, written with the first moment
        h = m·c so that nothing divides by m: 57 multiplies and 45 adds where nothing is zero,
        against 66 and 54 for I·a + v ×* (I·v) (tests/test_ir.py; docs/performance.md §34)."""
        w, u = v[:3], v[3:]
        wd, ud = a[:3], a[3:]
        ao = vadd(ud, cross(w, u))
        n = vadd(vadd(mat3_vec(g, self.Ib, wd), cross(w, mat3_vec(g, self.Ib, w))), cross(self.h, ao))
        f = vadd(vadd(vscale(self.m, ao), cross(wd, self.h)), cross(w, cross(w, self.h)))
        return n + f

    def __add__(self, o):
        return Inertia(self.m + o.m, vadd(self.h, o.h), madd(self.Ib, o.Ib))

    def to_parent(self, g, X: XForm):
        """XᵀIX for X = plux(E, r) (parent → child): y = Eᵀh, h' = y + m r,
        Ī' = EᵀĪE − (y rᵀ + r yᵀ − 2 (r·y) 1) − m (r rᵀ − (r·r) 1). With ``X.split``, the
        joint's rotation first (Ī by the double angle, h as a vector), then X_tree's."""
        if X.split is not None:
            rot, tree = X.split
            return Inertia(self.m, rot.vec(self.h), rot.sym(self.Ib)).to_parent(g, tree)
        E, r, m = X.E, X.r, self.m
        y = mat3T_vec(g, E, self.h)
        IE = mat_mat(g, self.Ib, E)
        ry = dot(g, r, y)
        rr = dot(g, r, r)
        Ib = [[None] * 3 for _ in range(3)]
        for a in range(3):
            for b in range(a, 3):
                e = dot(g, [E[0][a], E[1][a], E[2][a]], [IE[0][b], IE[1][b], IE[2][b]])
                e = e - (y[a] * r[b] + r[a] * y[b]) - m * (r[a] * r[b])
                if a == b:
                    e = e + 2.0 * ry + m * rr
                Ib[a][b] = Ib[b][a] = e
        return Inertia(m, vadd(y, vscale(m, r)), Ib)

    def rate(self, g, v):
        """v ×* I − I v×, the rate of change of a body's inertia moving with velocity v = [ω; u]:
        mass 0, h' = ω × h + m u, Ī' = ω×Ī − Īω× − (h uᵀ + u hᵀ) + 2 (u·h) 1."""
        w, u = v[:3], v[3:]
        C = transpose([cross(w, [self.Ib[0][k], self.Ib[1][k], self.Ib[2][k]]) for k in range(3)])  # ω×Ī
        uh = dot(g, u, self.h)
        Ib = [[None] * 3 for _ in range(3)]
        for a in range(3):
            for b in range(a, 3):
                e = C[a][b] + C[b][a] - (self.h[a] * u[b] + u[a] * self.h[b])
                if a == b:
                    e = e + 2.0 * uh
                Ib[a][b] = Ib[b][a] = e
        return Inertia(g.const(0.0), vadd(cross(w, self.h), vscale(self.m, u)), Ib)


def crm(g, v, m):
    """v ×ₘ m = [ω × mω; ω × mv + vv × mω]"""
    w, vl = v[:3], v[3:]
    return cross(w, m[:3]) + vadd(cross(w, m[3:]), cross(vl, m[:3]))


def crf(g, v, f):
    """v ×_f f = [ω × n + vv × f; ω × f]"""
    w, vl = v[:3], v[3:]
    return vadd(cross(w, f[:3]), cross(vl, f[3:])) + cross(w, f[3:])


def mscale(s, A):
    return [[s * x for x in row] for row in A]


def mat_vec(g, M, x):
    return [dot(g, row, x) for row in M]


def matT_vec(g, M, x):
    return [dot(g, [M[k][j] for k in range(len(M))], x) for j in range(len(M[0]))]


def mat_mat(g, A, B):
    n, k, m = len(A), len(B), len(B[0])
    return [[dot(g, A[i], [B[l][j] for l in range(k)]) for j in range(m)] for i in range(n)]


def transpose(A):
    return [list(r) for r in zip(*A)]


def madd(A, B):
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(A, B)]


def msub(A, B):
    return [[x - y for x, y in zip(ra, rb)] for ra, rb in zip(A, B)]


def ldlt(g, D):
    """LDLᵀ of a symmetric positive-definite matrix, straight-line and without square roots
    (one division per pivot): (L unit lower triangular, d, 1/d)."""
    n = len(D)
    L = [[g.const(1.0 if i == j else 0.0) for j in range(n)] for i in range(n)]
    d = [None] * n
    dinv = [None] * n
    for j in range(n):
        acc = D[j][j]
        for k in range(j):
            acc = acc - L[j][k] * L[j][k] * d[k]
        d[j] = acc
        dinv[j] = 1.0 / acc
        for i in range(j + 1, n):
            acc = D[i][j]
            for k in range(j):
                acc = acc - L[i][k] * L[j][k] * d[k]
            L[i][j] = acc * dinv[j]
    return L, d, dinv


def ldlt_substitute(L, Dinv, B):
    """M⁻¹ B from M's LDLᵀ factors (:func:`ldlt`: unit lower L, 1/d as Dinv) for B as rows of
    right-hand-side columns: the forward and backward substitutions, straight-line."""
    n = len(L)
    k = len(B[0]) if B else 0
    out = [[None] * k for _ in range(n)]
    for c in range(k):
        y = [None] * n
        for i in range(n):
            s = B[i][c]
            for j in range(i):
                s = s - L[i][j] * y[j]
            y[i] = s
        for i in reversed(range(n)):
            s = y[i] * Dinv[i]
            for j in range(i + 1, n):
                s = s - L[j][i] * out[j][c]
            out[i][c] = s
    return out


def spd_inverse(g, D):
    """Inverse of a small symmetric positive-definite matrix by LDLᵀ, straight-line."""
    n = len(D)
    if n == 1:
        return [[1.0 / D[0][0]]]
    L, d, dinv = ldlt(g, D)
    # inverse of unit-lower L by forward substitution, then D⁻¹ = L⁻ᵀ diag(1/d) L⁻¹
    Li = [[g.const(1.0 if i == j else 0.0) for j in range(n)] for i in range(n)]
    for i in range(n):
        for j in range(i):
            acc = g.const(0.0) if g.fold else None
            for k in range(j, i):
                t = L[i][k] * Li[k][j]
                acc = t if acc is None else acc + t
            Li[i][j] = -acc
    out = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            acc = None
            for k in range(j, n):
                t = Li[k][i] * Li[k][j] * dinv[k]
                acc = t if acc is None else acc + t
            out[i][j] = out[j][i] = acc
    return out
