"""Dense spatial (6-D) algebra, Featherstone's conventions, written plainly.

Motion vectors are ``[ω; v]`` and force vectors ``[n; f]``. A Plücker transform ``X = plux(E, r)``
maps motion vectors from frame A to frame B, where ``E`` is the rotation taking A coordinates to
B coordinates (B's axes expressed in A, transposed) and ``r`` is B's origin expressed in A.
Used by the model loader and the NumPy reference; deliberately free of sparsity tricks.

Every product here is :func:`mm`, never ``@``: the model's constants are printed into generated
sources as exact decimals, so they must be the same bits on every machine (see :func:`mm`).
"""
from __future__ import annotations

import math

import numpy as np


def mm(A, B) -> np.ndarray:
    """``A @ B`` (NumPy's matmul semantics: matrices, vectors, stacks) summed in a fixed order.

    NumPy hands a float64 ``@`` (and ``np.dot``, ``np.linalg.norm`` of a vector) to BLAS, and
    OpenBLAS chooses its kernel from the CPU: its AVX2, AVX-512 and SSE-without-FMA kernels group
    the same sums differently, or fuse multiply and add, so the last bit of a product depends on
    the machine. Whatever of it reaches a generated file — the model's constants (joint
    transforms, inertias), a testbench's input vectors — must not (issue 38). Here every entry is
    ``(((a₀b₀ + a₁b₁) + a₂b₂) + …)``: element-wise ufuncs, one IEEE-rounded multiply or add each,
    which NumPy never fuses or reorders on any SIMD width. 4–10× slower than BLAS on 6×6 operands,
    so the reference uses it only where its numbers can reach a generated file.

    Computed as every product at once (one multiply over the broadcast ``(…, m, k, n)``) and the
    running sum over k by ``np.add.accumulate``: a prefix sum, each entry the previous one plus
    the next product, so sequential by definition (unlike ``np.add.reduce``/``sum``, which sum
    pairwise in blocks along a contiguous axis). The same bits as one multiply-and-add per k,
    3–4.5× faster on the reference's 3- and 6-vectors and matrices (docs/performance.md §39).
    """
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    if A.ndim == 0 or B.ndim == 0:
        raise ValueError(f"mm: operands must be vectors or matrices, got shapes {A.shape} and {B.shape}")
    a = A[None, :] if A.ndim == 1 else A   # (…, m, k)
    b = B[:, None] if B.ndim == 1 else B   # (…, k, n)
    k = a.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"mm: shapes {A.shape} and {B.shape} do not match (inner sizes {k} and {b.shape[-2]})")
    if k == 0:
        out = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]))
    else:
        products = a[..., :, :, None] * b[..., None, :, :]  # (…, m, k, n)
        out = np.add.accumulate(products, axis=-2)[..., :, -1, :]
    if B.ndim == 1:
        out = out[..., 0]
    if A.ndim == 1:
        out = out[..., 0, :] if B.ndim > 1 else out[..., 0]
    return out


def norm(x) -> np.ndarray | float:
    """Euclidean norm over the last axis, machine-independent (see :func:`mm`;
    ``np.linalg.norm`` of a vector is a BLAS dot product). A vector's is Python's ``math.hypot``
    (a float: scaled, so 1e200 or 1e-200 entries neither overflow nor underflow; plain C
    arithmetic, the same on every machine); a stack's, the fixed-order sum of squares."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        return math.hypot(*x.tolist())
    s = x[..., 0] * x[..., 0]
    for j in range(1, x.shape[-1]):
        s = s + x[..., j] * x[..., j]
    return np.sqrt(s)


def skew(p) -> np.ndarray:
    """3×3 matrix with ``skew(p) @ x == cross(p, x)``."""
    x, y, z = p
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


_HALF_PI = np.pi / 2
#: quarter turns are recognised up to 4 turns either way. Beyond, 4 ulps of the angle grow past
#: 1e-14 and then past π/2 itself (above ~1e16 every double is "within 4 ulps" of some k·π/2), so
#: large angles are taken as written: the cosine and sine of the double, as Pinocchio computes
#: them.
_SNAP_MAX = 8 * np.pi


def cos_sin(t: float):
    """cos and sin of an angle, exact (0, ±1) at multiples of π/2.

    URDFs write quarter turns as the double nearest π/2 (1.5707963267948966), whose cosine in
    float64 is 6.1e-17, not 0: noise that would defeat structural-zero pruning everywhere.
    An angle of at most 4 turns within 4 ulps of k·π/2 is taken as exactly k·π/2 — a change
    below 1.4e-14, far below float64 resolution of any result. Angles rounded coarser (1.5708)
    are left as written; that is what `rbdgen generate --snap` is for. Larger angles are never
    snapped (see _SNAP_MAX). The angle must be finite (the URDF loader checks).
    """
    t = float(t)
    if abs(t) <= _SNAP_MAX:
        k = round(t / _HALF_PI)
        if abs(t - k * _HALF_PI) <= 4 * np.spacing(max(abs(t), 1.0)):
            return ((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0))[k % 4]
    return math.cos(t), math.sin(t)


def rot_x(t: float) -> np.ndarray:
    """Active rotation about x by angle t (columns are the rotated axes)."""
    c, s = cos_sin(t)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(t: float) -> np.ndarray:
    c, s = cos_sin(t)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(t: float) -> np.ndarray:
    c, s = cos_sin(t)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rpy_to_rot(rpy) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) · Ry(pitch) · Rx(roll)."""
    r, p, y = rpy
    return mm(mm(rot_z(y), rot_y(p)), rot_x(r))


def axis_angle_to_rot(axis, t: float) -> np.ndarray:
    """Active rotation by angle t about the unit vector ``axis`` (Rodrigues)."""
    a = np.asarray(axis, dtype=float)
    K = skew(a)
    t = float(t)
    return np.eye(3) + math.sin(t) * K + (1.0 - math.cos(t)) * mm(K, K)


def quat_to_rot(quat_xyzw) -> np.ndarray:
    """Rotation matrix of a quaternion given as (x, y, z, w) — Pinocchio's storage order.

    The quaternion is normalised first, so a slightly off-unit input gives a proper rotation.
    """
    x, y, z, w = np.asarray(quat_xyzw, dtype=float) / norm(quat_xyzw)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def plux(E: np.ndarray, r) -> np.ndarray:
    """Plücker motion transform from rotation E (A→B coordinates) and B's origin r (in A)."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -mm(E, skew(r))
    return X


def pose_to_X(R: np.ndarray, p) -> np.ndarray:
    """Motion transform parent→child for a child frame with orientation R and origin p in the parent."""
    return plux(R.T, p)


def X_inverse(X: np.ndarray) -> np.ndarray:
    """Inverse of a Plücker motion transform."""
    E = X[:3, :3]
    Erx = -X[3:, :3]          # E · skew(r)
    rx = mm(E.T, Erx)         # skew(r)
    r = np.array([rx[2, 1], rx[0, 2], rx[1, 0]])
    return plux(E.T, -mm(E, r))


def crm(v) -> np.ndarray:
    """Motion cross-product matrix: ``crm(v) @ m == v ×ₘ m``."""
    w, u = v[:3], v[3:]
    M = np.zeros((6, 6))
    M[:3, :3] = skew(w)
    M[3:, 3:] = skew(w)
    M[3:, :3] = skew(u)
    return M


def crf(v) -> np.ndarray:
    """Force cross-product matrix: ``crf(v) == -crm(v).T``."""
    return -crm(v).T


def spatial_inertia(mass: float, com, I_com: np.ndarray) -> np.ndarray:
    """Spatial inertia about a frame's origin, from mass, COM (in that frame) and the
    rotational inertia about the COM (axes of that frame)."""
    C = skew(com)
    I = np.zeros((6, 6))
    I[:3, :3] = I_com + mm(mass * C, C.T)
    I[:3, 3:] = mass * C
    I[3:, :3] = mass * C.T
    I[3:, 3:] = mass * np.eye(3)
    return I


def inertia_parts(I: np.ndarray):
    """Inverse of :func:`spatial_inertia`: (mass, com, rotational inertia about the COM)."""
    m = I[5, 5]
    if m <= 0.0:
        return 0.0, np.zeros(3), I[:3, :3].copy()
    mC = I[:3, 3:]
    com = np.array([mC[2, 1], mC[0, 2], mC[1, 0]]) / m
    C = skew(com)
    return m, com, I[:3, :3] - mm(m * C, C.T)


def transform_inertia(X: np.ndarray, I: np.ndarray) -> np.ndarray:
    """Express an inertia given in frame B in frame A, for X the motion transform A→B: Xᵀ I X."""
    return mm(mm(X.T, I), X)


def rot_to_quat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w) of a rotation matrix, w ≥ 0."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = np.array([(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s])
    else:
        k = int(np.argmax(np.diag(R)))
        i, j = (k + 1) % 3, (k + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[k, k] - R[i, i] - R[j, j])
        q = np.zeros(4)
        q[k] = 0.25 * s
        q[i] = (R[i, k] + R[k, i]) / s
        q[j] = (R[j, k] + R[k, j]) / s
        q[3] = (R[j, i] - R[i, j]) / s
    q = q / norm(q)
    return q if q[3] >= 0 else -q


def se3_exp(v_lin, w):
    """Exponential of a body twist (linear v, angular w): (R, p) of the displacement."""
    v_lin, w = np.asarray(v_lin, float), np.asarray(w, float)
    th = norm(w)
    W = skew(w)
    if th < 1e-8:
        R = np.eye(3) + W + mm(0.5 * W, W)
        V = np.eye(3) + 0.5 * W + mm(W, W) / 6.0
    else:
        R = np.eye(3) + math.sin(th) / th * W + mm((1 - math.cos(th)) / th**2 * W, W)
        V = np.eye(3) + (1 - math.cos(th)) / th**2 * W + mm((th - math.sin(th)) / th**3 * W, W)
    return R, mm(V, v_lin)


def inertia_inverse(I: np.ndarray) -> np.ndarray:
    """The inverse of a rigid body's spatial inertia, by Fijany's Eq. (76) (seed 002) in
    Featherstone's order: with I = T diag(Ī, m·1) Tᵀ, T = [[1, c×], [0, 1]] (c the centre of
    mass, Ī the rotational inertia about it),

        I⁻¹ = [[Ī⁻¹, −Ī⁻¹ c×], [c× Ī⁻¹, −c× Ī⁻¹ c× + 1/m]].

    Ī⁻¹ is the adjugate over the determinant and every product is :func:`mm`: the entries are
    the same bits on every machine (they are printed into generated sources; a LAPACK inverse's
    last bit depends on the BLAS kernel). Raises ValueError for a body that is not a rigid body
    with mass: m ≤ 0, or Ī not positive definite."""
    m, c, Ib = inertia_parts(np.asarray(I, dtype=float))
    if not m > 0.0:
        raise ValueError(f"mass {m!r} is not positive")
    a, b, cc = Ib[0].tolist(), Ib[1].tolist(), Ib[2].tolist()
    adj = [[b[1] * cc[2] - b[2] * cc[1], a[2] * cc[1] - a[1] * cc[2], a[1] * b[2] - a[2] * b[1]],
           [b[2] * cc[0] - b[0] * cc[2], a[0] * cc[2] - a[2] * cc[0], a[2] * b[0] - a[0] * b[2]],
           [b[0] * cc[1] - b[1] * cc[0], a[1] * cc[0] - a[0] * cc[1], a[0] * b[1] - a[1] * b[0]]]
    det = a[0] * adj[0][0] + a[1] * adj[1][0] + a[2] * adj[2][0]
    minors = (a[0], a[0] * b[1] - a[1] * b[0], det)  # leading principal minors (Sylvester)
    if not all(x > 0.0 for x in minors) or not det > 1e-12 * max(abs(x) for x in a + b + cc) ** 3:
        raise ValueError("the rotational inertia about the centre of mass is not positive definite")
    Jinv = np.array(adj) / det
    C = skew(c)
    out = np.zeros((6, 6))
    out[:3, :3] = Jinv
    out[:3, 3:] = -mm(Jinv, C)
    out[3:, :3] = mm(C, Jinv)
    out[3:, 3:] = -mm(mm(C, Jinv), C) + np.eye(3) / m
    return out


def complement(S) -> np.ndarray:
    """W: an orthonormal basis of the orthogonal complement of the columns of S (6 × k, orthonormal
    columns), 6 × (6 − k) — Fijany's W_i for a joint's H_i = S_i (seed 002 Eqs. (41)–(44):
    WᵀH = 0, WᵀW = 1, HHᵀ + WWᵀ = 1). Gram–Schmidt, twice, of the unit vectors e₀ … e₅ against
    S and the columns found, each step taking the e_k that keeps the most of its length (the
    lowest k among equals), in plain float arithmetic (the same bits everywhere): an axis along
    x, y or z gives the selection matrix of §V.A (exact zeros and ones, the rows in order), any
    other axis a dense W."""
    S = np.asarray(S, dtype=float)
    basis = [S[:, j].tolist() for j in range(S.shape[1])]
    found, left = [], list(range(6))
    while len(basis) < 6:
        best = None
        for k in left:
            w = [1.0 if r == k else 0.0 for r in range(6)]
            for _ in range(2):
                for b in basis:
                    d = math.fsum(x * y for x, y in zip(w, b))
                    if d != 0.0:
                        w = [x - d * y for x, y in zip(w, b)]
            n = math.sqrt(math.fsum(x * x for x in w))
            if best is None or n > best[0]:
                best = (n, k, w)
        n, k, w = best
        if n < 1e-6:
            raise ValueError("the columns of S are not independent")
        w = [x / n for x in w]
        basis.append(w)
        found.append(w)
        left.remove(k)
    return np.array(found, dtype=float).T.reshape(6, len(found))
