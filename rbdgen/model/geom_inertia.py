"""Mass and inertia of MuJoCo geoms, as MuJoCo's compiler infers a body's inertia from its geoms
(``<compiler inertiafromgeom>``): the solid primitives' closed forms and a triangle mesh's volume
integrals, written from MuJoCo's ``mjCGeom::SetInertia`` and ``mjCMesh::ComputeVolume`` /
``ComputeInertia`` (``src/user/user_objects.cc``, ``user_mesh.cc``) — the formulas, not the code.

Everything here is in the geom's own frame; :mod:`rbdgen.model.mjcf` places and sums the
results. Sums over a mesh's faces are ``math.fsum`` (correctly rounded), so the numbers that reach
a generated file are the same bits on every machine (see :func:`rbdgen.spatial.mm`).

Meshes: binary and ASCII STL, Wavefront OBJ (``v`` and ``f`` lines; polygons are split into
triangle fans) and MuJoCo's own binary ``.msh``. MuJoCo's mesh ``inertia`` modes:

* ``legacy`` (MuJoCo's default): each face's pyramid volume counted positive, whatever its
  orientation — the exact volume of a mesh that is star-shaped about its faces' centroid;
* ``exact``: signed pyramid volumes (the divergence theorem; the mesh must be closed and
  consistently oriented);
* ``shell``: the surface as a thin shell of unit thickness (areas instead of volumes);
* ``convex``: the convex hull's volume (SciPy's Qhull, when SciPy is installed).
"""
from __future__ import annotations

import math
import os
import struct

import numpy as np

#: MuJoCo's mjEPS and mjMINVAL
EPS = 1e-14
MINVAL = 1e-15

PRIMITIVES = ("sphere", "capsule", "cylinder", "box", "ellipsoid")
MESH_INERTIA = ("legacy", "exact", "shell", "convex")


class MeshError(ValueError):
    """A mesh file that cannot be read, or whose volume or inertia is not physical."""


# ---- primitives ---------------------------------------------------------------------------------

def primitive_volume(kind: str, size) -> float:
    """Volume of a solid primitive with MuJoCo's ``size`` (radii and half-lengths)."""
    s = [float(x) for x in size]
    if kind == "sphere":
        return 4.0 * math.pi * s[0] ** 3 / 3.0
    if kind == "capsule":
        return 4.0 * math.pi * s[0] ** 3 / 3.0 + math.pi * s[0] ** 2 * 2.0 * s[1]
    if kind == "cylinder":
        return math.pi * s[0] ** 2 * 2.0 * s[1]
    if kind == "box":
        return 8.0 * s[0] * s[1] * s[2]
    if kind == "ellipsoid":
        return 4.0 * math.pi * s[0] * s[1] * s[2] / 3.0
    raise ValueError(f"no volume for geom type {kind!r}")


def primitive_inertia(kind: str, size, mass: float) -> np.ndarray:
    """Principal moments (about the centre, the geom's axes) of a solid primitive of ``mass``.

    Capsule: the cylinder of length 2·size[1] plus two hemispheres whose mass is split by
    volume; each hemisphere's own moment about the capsule's centre is m(2r²/5 + h²/4 + 3hr/8)
    (its centroid 3r/8 from the flat face, by the parallel-axis theorem), h the full cylinder
    length — MuJoCo's formula, and Pinocchio's ``Inertia::FromCapsule``."""
    s = [float(x) for x in size]
    m = float(mass)
    if kind == "sphere":
        i = 2.0 * m * s[0] ** 2 / 5.0
        return np.array([i, i, i])
    if kind == "capsule":
        r, h = s[0], 2.0 * s[1]
        ms = m * 4.0 * r / (4.0 * r + 3.0 * h)   # the two hemispheres' share of the mass (by volume)
        mc = m - ms
        ixy = mc * (3.0 * r * r + h * h) / 12.0 + 2.0 * ms * r * r / 5.0 + ms * h * (3.0 * r + 2.0 * h) / 8.0
        iz = mc * r * r / 2.0 + 2.0 * ms * r * r / 5.0
        return np.array([ixy, ixy, iz])
    if kind == "cylinder":
        r, h = s[0], 2.0 * s[1]
        ixy = m * (3.0 * r * r + h * h) / 12.0
        return np.array([ixy, ixy, m * r * r / 2.0])
    if kind == "box":
        a, b, c = (2.0 * x for x in s[:3])   # full edge lengths
        return np.array([m * (b * b + c * c), m * (a * a + c * c), m * (a * a + b * b)]) / 12.0
    if kind == "ellipsoid":
        a, b, c = (x * x for x in s[:3])
        return np.array([m * (b + c), m * (a + c), m * (a + b)]) / 5.0
    raise ValueError(f"no inertia for geom type {kind!r}")


# ---- meshes ---------------------------------------------------------------------------------------

def read_mesh(path: str):
    """(vertices (n, 3) float64 of float32 values, faces (m, 3) int) of an STL, OBJ or MSH file.
    A problem is a :class:`MeshError`; an unreadable file an ``OSError``."""
    ext = os.path.splitext(path)[1].lower()
    with open(path, "rb") as f:
        data = f.read()
    if ext == ".stl":
        v, f_ = _read_stl(data)
    elif ext == ".obj":
        v, f_ = _read_obj(data)
    elif ext == ".msh":
        v, f_ = _read_msh(data)
    else:
        raise MeshError(f"unknown mesh format '{ext or os.path.basename(path)}' (rbdgen reads .stl, .obj and .msh)")
    if len(v) < 4 or len(f_) < 1:
        raise MeshError(f"{len(v)} vertices and {len(f_)} faces: a solid mesh needs at least 4 vertices and a face")
    if not np.all(np.isfinite(v)):
        raise MeshError("a vertex coordinate is not finite (NaN or inf)")
    if f_.min() < 0 or f_.max() >= len(v):
        raise MeshError(f"a face refers to vertex {int(f_.max() if f_.max() >= len(v) else f_.min())}, "
                        f"but the mesh has {len(v)} vertices")
    # MuJoCo keeps vertices in single precision: the same numbers, whatever the file stored
    return v.astype(np.float32).astype(np.float64), f_


def _read_stl(data: bytes):
    if len(data) >= 84:
        n = struct.unpack_from("<I", data, 80)[0]
        if len(data) == 84 + 50 * n:  # binary: 80-byte header, count, 50 bytes per triangle
            rec = np.frombuffer(data, dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]),
                                count=n, offset=84)
            v = rec["v"].reshape(-1, 3).astype(np.float64)
            return v, np.arange(3 * n, dtype=np.int64).reshape(-1, 3)
    text = data.decode("ascii", errors="replace")
    if not text.lstrip().lower().startswith("solid"):
        raise MeshError(f"not an STL file: {len(data)} bytes, neither a binary STL (84 + 50·n bytes) nor ASCII "
                        f"('solid …')")
    verts = []
    for line in text.splitlines():
        p = line.split()
        if p and p[0].lower() == "vertex":
            if len(p) != 4:
                raise MeshError(f"ASCII STL: bad vertex line {line.strip()[:60]!r}")
            try:
                verts.append([float(x) for x in p[1:]])
            except ValueError:
                raise MeshError(f"ASCII STL: bad vertex line {line.strip()[:60]!r}") from None
    if len(verts) % 3:
        raise MeshError(f"ASCII STL: {len(verts)} vertices, not a whole number of triangles")
    v = np.array(verts, dtype=np.float64).reshape(-1, 3)
    return v, np.arange(len(v), dtype=np.int64).reshape(-1, 3)


def _read_obj(data: bytes):
    verts, faces = [], []
    for k, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        p = line.split()
        if not p:
            continue
        try:
            if p[0] == "v":
                verts.append([float(x) for x in p[1:4]])
                if len(p) < 4:
                    raise ValueError
            elif p[0] == "f":
                idx = []
                for tok in p[1:]:
                    i = int(tok.split("/")[0])
                    idx.append(i - 1 if i > 0 else len(verts) + i)  # 1-based; negative: from the end
                if len(idx) < 3:
                    raise ValueError
                faces += [[idx[0], idx[j], idx[j + 1]] for j in range(1, len(idx) - 1)]
        except ValueError:
            raise MeshError(f"OBJ line {k}: cannot read {line.strip()[:60]!r}") from None
    return np.array(verts, dtype=np.float64).reshape(-1, 3), np.array(faces, dtype=np.int64).reshape(-1, 3)


def _read_msh(data: bytes):
    """MuJoCo's legacy binary mesh: int32 nvertex, nnormal, ntexcoord, nface, then float32
    vertices (3 each), normals (3), texture coordinates (2) and int32 faces (3)."""
    if len(data) < 16:
        raise MeshError(f"MSH file of {len(data)} bytes: shorter than its 16-byte header")
    nv, nn, nt, nf = struct.unpack_from("<4i", data, 0)
    want = 16 + 4 * (3 * nv + 3 * nn + 2 * nt + 3 * nf)
    if min(nv, nn, nt, nf) < 0 or len(data) != want:
        raise MeshError(f"MSH header counts (vertices {nv}, normals {nn}, texcoords {nt}, faces {nf}) ask for "
                        f"{want} bytes, the file has {len(data)}")
    v = np.frombuffer(data, dtype="<f4", count=3 * nv, offset=16).reshape(-1, 3).astype(np.float64)
    off = 16 + 4 * (3 * nv + 3 * nn + 2 * nt)
    f = np.frombuffer(data, dtype="<i4", count=3 * nf, offset=off).reshape(-1, 3).astype(np.int64)
    if nf == 0:
        raise MeshError("the MSH file has no faces (MuJoCo would build its convex hull; rbdgen does not)")
    return v, f


def _fsum(x) -> float:
    return math.fsum(np.asarray(x, dtype=float).ravel().tolist())


def _triangles(v, f):
    """Per face: (area, unit normal, centroid), MuJoCo's ``triangle``: faces shorter than
    mjMINVAL have area 0."""
    A, B, C = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    b, c = B - A, C - A
    n = np.stack([b[:, 1] * c[:, 2] - b[:, 2] * c[:, 1], b[:, 2] * c[:, 0] - b[:, 0] * c[:, 2],
                  b[:, 0] * c[:, 1] - b[:, 1] * c[:, 0]], axis=1)
    ln = np.sqrt(n[:, 0] * n[:, 0] + n[:, 1] * n[:, 1] + n[:, 2] * n[:, 2])
    ok = ln >= MINVAL
    area = np.where(ok, 0.5 * ln, 0.0)
    unit = np.where(ok[:, None], n / np.where(ok, ln, 1.0)[:, None], 0.0)
    cen = (A + B + C) / 3.0
    return area, unit, cen, A, B, C


def mesh_inertia(vertices, faces, mode: str = "legacy"):
    """(volume, centre of mass (3,), inertia (3, 3) about the centre of mass per unit density)
    of a closed triangle mesh, as MuJoCo's compiler computes them (``mode``: see the module
    docstring). ``shell``: area instead of volume. A mesh whose volume (area) is too small or
    negative, or whose inertia is not physical, is a :class:`MeshError`."""
    if mode not in MESH_INERTIA:
        raise MeshError(f"unknown mesh inertia mode {mode!r} (MuJoCo's: {', '.join(MESH_INERTIA)})")
    v = np.asarray(vertices, dtype=float)
    f = np.asarray(faces, dtype=np.int64)
    if mode == "convex":
        try:
            from scipy.spatial import ConvexHull
        except ImportError:
            raise MeshError("inertia=\"convex\" needs the mesh's convex hull, which rbdgen computes with SciPy; "
                            "install scipy, or use the legacy or exact mode") from None
        try:
            hull = ConvexHull(v)
        except Exception as e:  # noqa: BLE001 — Qhull's errors (flat or degenerate point sets)
            raise MeshError(f"no convex hull: {' '.join(str(e).split())[:120]}") from None
        f = np.array(hull.simplices, dtype=np.int64)
        # Qhull does not orient its facets: turn each outward (away from an interior point)
        inner = v[hull.vertices].mean(axis=0)
        area, unit, cen, *_ = _triangles(v, f)
        flip = np.einsum("ij,ij->i", cen - inner, unit) < 0
        f[flip] = f[flip][:, [0, 2, 1]]
    area, unit, cen, *_ = _triangles(v, f)
    total_area = _fsum(area)
    if total_area < MINVAL:
        raise MeshError(f"mesh surface area {total_area:g} is too small")
    facecen = np.array([_fsum(area * cen[:, k]) for k in range(3)]) / total_area

    # volume and centre of mass: a pyramid from the faces' centroid to each face
    if mode == "shell":
        w = area
    else:
        w = ((cen[:, 0] - facecen[0]) * unit[:, 0] + (cen[:, 1] - facecen[1]) * unit[:, 1]
             + (cen[:, 2] - facecen[2]) * unit[:, 2]) * area / 3.0
        if mode == "legacy":
            w = np.abs(w)
    vol = _fsum(w)
    if vol < MINVAL:
        what = "area" if mode == "shell" else "volume"
        if vol < 0:
            raise MeshError(f"mesh {what} {vol:g} is negative (faces oriented inwards?)")
        raise MeshError(f"mesh {what} {vol:g} is too small (a flat or open mesh? MuJoCo's inertia=\"shell\" takes "
                        f"a surface)")
    pc = 0.75 * cen + 0.25 * facecen
    com = np.array([_fsum(w * pc[:, k]) for k in range(3)]) / vol

    # second moments about the centre of mass
    _, _, cen_c, D, E, F = _triangles(v - com, f)
    if mode == "shell":
        w2, C = area, 12.0
    else:
        w2 = (cen_c[:, 0] * unit[:, 0] + cen_c[:, 1] * unit[:, 1] + cen_c[:, 2] * unit[:, 2]) * area / 3.0
        if mode == "legacy":
            w2 = np.abs(w2)
        C = 20.0
    P = np.zeros((3, 3))
    for a in range(3):
        for b in range(a, 3):
            t = (2.0 * (D[:, a] * D[:, b] + E[:, a] * E[:, b] + F[:, a] * F[:, b])
                 + D[:, a] * E[:, b] + D[:, b] * E[:, a] + D[:, a] * F[:, b] + D[:, b] * F[:, a]
                 + E[:, a] * F[:, b] + E[:, b] * F[:, a])
            P[a, b] = P[b, a] = _fsum(w2 / C * t)
    vol2 = _fsum(w2)  # MuJoCo's volume: the one summed about the centre of mass
    I = np.array([[P[1, 1] + P[2, 2], -P[0, 1], -P[0, 2]],
                  [-P[0, 1], P[0, 0] + P[2, 2], -P[1, 2]],
                  [-P[0, 2], -P[1, 2], P[0, 0] + P[1, 1]]])
    ev = np.linalg.eigvalsh(I)
    if not ev[2] > 0:
        raise MeshError("the mesh's inertia has no positive principal moment")
    a, b, c = ev
    if a + b < c * (1.0 - 1e-6) - 1e-9:
        raise MeshError(f"the mesh's principal moments {a:.4g}, {b:.4g}, {c:.4g} violate A + B ≥ C")
    return vol2, com, I


def transform_vertices(v, *, scale=(1.0, 1.0, 1.0), refpos=(0.0, 0.0, 0.0), refquat=(1.0, 0.0, 0.0, 0.0)):
    """MuJoCo's mesh ``refpos``/``refquat`` (the mesh's frame in its file; deprecated) and
    ``scale``, applied as MuJoCo does (translate, rotate back, scale); a left-handed scale
    (negative product) reverses the faces, see :func:`fix_winding`."""
    v = np.asarray(v, dtype=float) - np.asarray(refpos, dtype=float)
    qw, qx, qy, qz = (float(x) for x in refquat)
    if (qw, qx, qy, qz) != (1.0, 0.0, 0.0, 0.0):
        n = math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
        qw, qx, qy, qz = qw / n, qx / n, qy / n, qz / n
        R = np.array([[1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)],
                      [2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)],
                      [2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)]])
        v = v[:, 0:1] * R[0] + v[:, 1:2] * R[1] + v[:, 2:3] * R[2]  # vᵀ R: the inverse rotation
    return v * np.asarray(scale, dtype=float)


def fix_winding(faces, scale):
    """Faces of a mesh mirrored by a negative ``scale`` product, turned back to outward."""
    f = np.asarray(faces)
    return f[:, [0, 2, 1]] if float(np.prod(scale)) < 0 else f
