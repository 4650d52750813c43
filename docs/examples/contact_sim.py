"""Two contact simulations with rbdgen's compiled kernels (docs/contact.md).

1. The iiwa's flange sliding on a plane: a Type I contact with n_c = 3 constrained directions
   (the normal translation and the two tilts; in LOCAL ``[linear; angular]`` coordinates
   W = [e_z | e_ωx | e_ωy]) and n_f = 3 free ones (frictionless: K_F = 0). Semi-implicit Euler at
   1 kHz for a few seconds, once with G_C = 0 (the constrained accelerations held at zero: the
   position drifts, as it must with any integrator) and once with Baumgarte's stabilisation in
   G_C = −2ω Wᵀ V − ω² e (e: the normal distance and the tilt). Plot: drift and contact force.
2. The quadruped standing on four feet (3-D point contacts), legs held by a PD controller: the
   feet's forces carry the robot's weight.

    python docs/examples/contact_sim.py [--seconds 3] [--plot docs/contact_sim.png]

Prints one line per simulation; ``--check`` exits 1 when a number is out of its stated bound
(the test suite runs it that way).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import rbdgen
from rbdgen import Contact, robots


PRESS = 15.0  # N


def iiwa_sliding(seconds: float, dt: float = 1e-3, baumgarte: float | None = None):
    model = rbdgen.load_urdf(robots.path("iiwa14"))
    flange = "iiwa_link_ee"
    kern = rbdgen.build(model, frames=[flange], kernels=["aba", "gravity", "frame_placement",
                                                         "frame_jacobian_local", "contact_terms"])
    q = np.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0])
    v = np.zeros(7)
    T0 = kern.frame_placement(q, flange)
    n, p0 = T0[:3, 2].copy(), T0[:3, 3].copy()  # the plane: through the flange, normal = its z axis
    W = np.zeros((6, 3))
    W[2, 0] = W[3, 1] = W[4, 2] = 1.0  # [linear; angular]: v_z, ω_x, ω_y constrained
    out = {"t": [], "dist": [], "tilt": [], "force": [], "slide": []}
    steps = int(round(seconds / dt))
    for s in range(steps):
        t = s * dt
        T = kern.frame_placement(q, flange)
        dist = float(n @ (T[:3, 3] - p0))          # normal distance from the plane
        nl = T[:3, :3].T @ n                        # the plane's normal in flange axes (e_z if no tilt)
        tilt = np.cross(nl, [0.0, 0.0, 1.0])[:2]    # small-angle tilt about the flange's x and y
        G_C = np.zeros(3)
        J = kern.frame_jacobian(q, flange, "local")
        if baumgarte:
            w = baumgarte
            Vc = W.T @ (J @ v)
            G_C = -2.0 * w * Vc - w * w * np.r_[dist, tilt]
        # gravity compensation, 15 N pressed along the flange's z axis onto the plane, a slow
        # push on the first two joints, damping
        tau = kern.gravity(q) + J[2] * PRESS + np.r_[3.0 * np.sin(2 * np.pi * 0.5 * t),
                                                     2.0 * np.cos(2 * np.pi * 0.3 * t), np.zeros(5)] - 0.5 * v
        qdd, F = kern.contact_fd(q, v, tau, [Contact(flange, "type1", W=W, G_C=G_C)])
        v = v + dt * qdd
        q = q + dt * v
        out["t"].append(t)
        out["dist"].append(dist)
        out["tilt"].append(float(np.linalg.norm(tilt)))
        out["force"].append(F[0, 2])               # the normal force on the plane (LOCAL z)
        out["slide"].append(float(np.linalg.norm(T[:3, 3] - p0 - n * dist)))
    return {k: np.array(x) for k, x in out.items()}


def quadruped_standing(seconds: float, dt: float = 1e-3):
    model = rbdgen.load_urdf(robots.path("quadruped"), floating_base=True)
    feet = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    kern = rbdgen.build(model, frames=feet, kernels=["aba", "frame_placement", "contact_terms"])
    q = model.neutral()
    q[2] = 0.3
    legs = np.tile([0.0, 0.8, -1.6], 4)            # hip, thigh, calf of each leg: a crouch
    q[7:] = legs
    v = np.zeros(model.nv)
    contacts = [Contact(f, "3d") for f in feet]
    weight = model.total_mass * 9.81
    support, heights = [], []
    for _ in range(int(round(seconds / dt))):
        tau = np.r_[np.zeros(6), 60.0 * (legs - q[7:]) - 2.0 * v[6:]]
        qdd, F = kern.contact_fd(q, v, tau, contacts)
        oMf = kern.frame_placement(q)
        # each foot's force in world axes (F: what the foot exerts on the ground, LOCAL)
        support.append(-sum(oMf[k, :3, :3] @ F[k, :3] for k in range(4))[2])
        heights.append(q[2])
        v = v + dt * qdd
        q = model.integrate(q, dt * v)
    return np.array(support), weight, np.array(heights)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--plot", default=None, help="write the figure here (needs matplotlib)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a number is out of its bound")
    a = ap.parse_args(argv)
    free = iiwa_sliding(a.seconds)
    held = iiwa_sliding(a.seconds, baumgarte=20.0)
    ok = True
    for name, r in (("G_C = 0", free), ("Baumgarte ω = 20/s", held)):
        print(f"iiwa flange on a plane, {name}: slid {r['slide'].max() * 1e3:.0f} mm in {a.seconds:g} s; "
              f"max |normal drift| {np.abs(r['dist']).max():.2e} m, max tilt {r['tilt'].max():.2e} rad; "
              f"normal force {r['force'].min():.1f} … {r['force'].max():.1f} N")
    # stated bounds: the stabilised run stays on the plane to a few micrometres, and does slide
    ok &= np.abs(held["dist"]).max() < 1e-4 and held["tilt"].max() < 1e-3 and held["slide"].max() > 0.01
    ok &= np.abs(held["dist"]).max() < np.abs(free["dist"]).max()
    support, weight, heights = quadruped_standing(min(a.seconds, 1.0))
    print(f"quadruped on four feet: vertical support {support[-1]:.2f} N against a weight of {weight:.2f} N "
          f"({abs(support[-1] / weight - 1):.1e} relative); base height {heights[0]:.4f} → {heights[-1]:.4f} m")
    ok &= abs(support[-1] / weight - 1) < 0.02
    ok &= abs(np.median(held["force"]) - PRESS) < 0.2 * PRESS  # the plane takes what the arm presses
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
        for name, r, st in (("G_C = 0", free, "--"), ("Baumgarte ω = 20/s", held, "-")):
            ax[0].semilogy(r["t"], np.abs(r["dist"]) + 1e-16, st, label=f"normal drift, {name}")
            ax[1].plot(r["t"], r["force"], st, label=name)
        ax[0].set_xlabel("t [s]")
        ax[0].set_ylabel("|distance from the plane| [m]")
        ax[0].legend(fontsize=8)
        ax[1].set_xlabel("t [s]")
        ax[1].set_ylabel("normal force on the plane [N]")
        ax[1].legend(fontsize=8)
        fig.suptitle("iiwa14 flange sliding on a plane (Type I contact, n_c = 3), semi-implicit Euler, 1 kHz")
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)
        print(f"wrote {a.plot}")
    if a.check and not ok:
        print("a number is out of its bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
