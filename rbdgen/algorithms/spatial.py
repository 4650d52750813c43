"""Spatial algebra over traced :class:`~rbdgen.ir.graph.Value` scalars.

Vectors are lists of 6 Values (motion ``[ω; v]``, force ``[n; f]``); a transform is a pair
``(E, r)`` (``X = plux(E, r)``) applied blockwise, which costs fewer multiplies than a 6×6
product even before zero pruning; inertias are 6×6 lists. Zero pruning and constant folding
happen in the graph, never here: with a non-folding graph the same code gives the dense count.
"""
from __future__ import annotations

from ..ir.graph import Graph, Value


def dot(g: Graph, a, b) -> Value:
    acc = g.const(0.0) if g.fold else None
    for x, y in zip(a, b):
        t = x * y
        acc = t if acc is None else acc + t
    return acc


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


class XForm:
    """Plücker transform X = plux(E, r): parent motion coordinates → child."""

    def __init__(self, E, r):
        self.E = E  # 3×3 Values
        self.r = r  # 3 Values

    def motion(self, g, m):
        """X·m = [E ω; E (v − r × ω)]"""
        w, v = m[:3], m[3:]
        return mat3_vec(g, self.E, w) + mat3_vec(g, self.E, vsub(v, cross(self.r, w)))

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

    def matrix(self, g):
        """The 6×6 matrix (for congruence transforms of inertias)."""
        E, r = self.E, self.r
        zero = g.const(0.0)
        # lower-left block −E [r]×: row k = −(E_k × … ) ; (E [r]×)_{kj} = Σ_l E_kl (r×)_lj
        rx = [[zero, -r[2], r[1]], [r[2], zero, -r[0]], [-r[1], r[0], zero]]
        LL = [[-dot(g, E[k], [rx[0][j], rx[1][j], rx[2][j]]) for j in range(3)] for k in range(3)]
        X = [[zero] * 6 for _ in range(6)]
        for a in range(3):
            for b in range(3):
                X[a][b] = E[a][b]
                X[3 + a][3 + b] = E[a][b]
                X[3 + a][b] = LL[a][b]
        return X


def crm(g, v, m):
    """v ×ₘ m = [ω × mω; ω × mv + vv × mω]"""
    w, vl = v[:3], v[3:]
    return cross(w, m[:3]) + vadd(cross(w, m[3:]), cross(vl, m[:3]))


def crf(g, v, f):
    """v ×_f f = [ω × n + vv × f; ω × f]"""
    w, vl = v[:3], v[3:]
    return vadd(cross(w, f[:3]), cross(vl, f[3:])) + cross(w, f[3:])


def mat_vec(g, M, x):
    return [dot(g, row, x) for row in M]


def matT_vec(g, M, x):
    return [dot(g, [M[k][j] for k in range(len(M))], x) for j in range(len(M[0]))]


def mat_mat(g, A, B):
    n, k, m = len(A), len(B), len(B[0])
    return [[dot(g, A[i], [B[l][j] for l in range(k)]) for j in range(m)] for i in range(n)]


def transpose(A):
    return [list(r) for r in zip(*A)]


def congruence(g, X, M):
    """Xᵀ M X for a symmetric M: the upper triangle is computed, the lower mirrored."""
    MX = mat_mat(g, M, X)
    n = len(X[0])
    out = [[None] * n for _ in range(n)]
    for i in range(n):
        col_i = [X[k][i] for k in range(len(X))]
        for j in range(i, n):
            out[i][j] = dot(g, col_i, [MX[k][j] for k in range(len(X))])
            out[j][i] = out[i][j]
    return out


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
