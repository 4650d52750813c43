"""Frame and contact methods of loaded kernels, by frame name and reference:

    kern.frame_placement(q, "tool0")                   → (4, 4)
    kern.frame_jacobian(q, "tool0", "local")            → (6, nv)
    kern.frame_bias_acceleration(q, v, "tool0", "world") → (6,)
    kern.osim_inverse(q, ["FL_foot", "FR_foot"])         → (12, 12)
    kern.contact_fd(q, v, tau, [rbdgen.Contact("FL_foot", "3d"), …]) → (q̈, F)
    kern.contact_fd(q, v, tau, [rbdgen.Loop("coupler_tip", "rocker_tip", "3d")])

Each calls the generated kernel (every selected frame at once) and picks the frames asked for;
``frame=None`` returns every selected frame. One state or a batch, like every kernel method.
``contact_fd`` solves the small contact system (its size: the constrained directions) with NumPy
on the kernel's ``contact_terms`` and finishes with the ``aba`` kernel:
q̈ = M⁻¹(τ − b − Jᵀ F) = aba(q, v, τ − Jᵀ F).
"""
from __future__ import annotations

import numpy as np

from .. import registry
from ..reference.contact import ContactError, ContactSystem, _check_contacts, _describe, check_finite_state, reference_name
from .stale import install as install_stale


def _need(owner, name, what):
    # owner.__dict__[name] is the by-name wrapper itself where the kernel was not built (frame_placement,
    # osim_inverse): calling it recursed without end
    f = owner.__dict__.get(f"_raw_{name}") or (owner.__dict__.get(name) if name in owner.kernels else None)
    if f is None:
        built = ", ".join(owner.kernels)
        raise ValueError(f"{what} needs the kernel {name}, which was not built (built: {built}); "
                         f"build with frames=[...] and kernels including {name}")
    return f


def _index(model, frames):
    if frames is None:
        return None, False
    if isinstance(frames, str):
        return [model.frame_index(frames)], True
    try:
        names = list(frames)
    except TypeError:
        raise ValueError(f"frames must be a frame name or a list of names, got {type(frames).__name__}") from None
    return [model.frame_index(n) for n in names], False


def _kw(kw, idx, what):
    """The keywords a by-name method hands to its generated kernel: ``out=`` only where it
    returns the kernel's whole output (no frames picked)."""
    if "out" in kw and idx is not None:
        raise ValueError(f"{what}: out= takes the kernel's whole output, every selected frame: "
                         "pass frame=None, or pick frames from the result")
    return kw


def _reference(reference):
    """The reference's canonical name ("LOCAL", "Local", pin.LOCAL → "local")."""
    return reference_name(reference)


def _host(x):
    """A host (numpy) view of a kernel output (cupy arrays are copied to the host)."""
    return x if isinstance(x, np.ndarray) else x.get()


def install(owner) -> None:
    """Give ``owner`` (loaded kernels with the frame kernels among ``owner.kernels``) the
    by-name methods above. The generated kernels stay reachable as ``owner.methods[name]``."""
    built = set(owner.kernels)

    def kernel(name):
        """The generated kernel ``name`` itself (``kern.frame_placement`` and
        ``kern.osim_inverse`` are the by-name wrappers around theirs)."""
        if name not in built:
            raise ValueError(f"kernel {name!r} was not built (built: {', '.join(owner.kernels)})")
        return owner.__dict__.get(f"_raw_{name}") or owner.__dict__[name]

    owner.__dict__["kernel"] = kernel
    install_stale(owner)  # kern.rnea_stale_start
    for name in built:
        if registry.get(name).constraints:  # constrained_fd, its derivatives, constrained_fd_schur
            _install_constrained(owner, name)
    if not any(k.startswith("frame_") or k in ("osim_inverse", "contact_terms") for k in built):
        return
    model = owner.model
    for name in ("frame_placement", "osim_inverse"):
        if name in built:
            owner.__dict__[f"_raw_{name}"] = owner.__dict__[name]

    def frame_placement(q, frame=None, **kw):
        """Placement of ``frame`` (a URDF link name) in the world, 4×4; ``None``: every selected
        frame, (nf, 4, 4). Keywords (``out=``, and on the GPU ``shape=``, ``stream=``) go to
        the generated kernel."""
        idx, one = _index(model, frame)
        out = _need(owner, "frame_placement", "frame_placement")(q, **_kw(kw, idx, "frame_placement"))
        if idx is None:
            return out
        return out[..., idx[0], :, :] if one else out[..., idx, :, :]

    def frame_jacobian(q, frame=None, reference="local", **kw):
        """Jacobian of ``frame`` in ``reference`` ("local", "local_world_aligned", "world"; any
        case, as Pinocchio's LOCAL, or ``pin.LOCAL``), rows ``[linear; angular]``: (6, nv);
        ``None``: every selected frame, (nf, 6, nv)."""
        idx, one = _index(model, frame)
        out = _need(owner, f"frame_jacobian_{_reference(reference)}", "frame_jacobian")(
            q, **_kw(kw, idx, "frame_jacobian"))
        if idx is None:
            return out
        return out[..., idx[0], :, :] if one else out[..., idx, :, :]

    def frame_bias_acceleration(q, v, frame=None, reference="local", **kw):
        """J̇q̇ of ``frame`` in ``reference``: its spatial acceleration ``[linear; angular]`` at
        q̈ = 0 without gravity, (6,); ``None``: every selected frame, (nf, 6)."""
        idx, one = _index(model, frame)
        out = _need(owner, f"frame_bias_acceleration_{_reference(reference)}", "frame_bias_acceleration")(
            q, v, **_kw(kw, idx, "frame_bias_acceleration"))
        if idx is None:
            return out
        return out[..., idx[0], :] if one else out[..., idx, :]

    def osim_inverse(q, frames=None, **kw):
        """Λ⁻¹ = J M⁻¹ Jᵀ of the stacked LOCAL Jacobians of ``frames`` (default every selected
        frame): (6m, 6m), ``[linear; angular]`` per frame."""
        idx, _ = _index(model, frames)
        out = _need(owner, "osim_inverse", "osim_inverse")(q, **_kw(kw, idx, "osim_inverse"))
        if idx is not None:
            out = out[..., idx, :, :, :][..., idx, :]
        m = out.shape[-2]
        return out.reshape(out.shape[:-4] + (6 * m, 6 * m))

    systems: dict = {}  # contact lists seen (by identity of their Contact objects) → their system

    def contact_fd(q, v, tau, contacts, **kw):
        """Forward dynamics with contacts and loops → (q̈, F): F (one row per constraint) the
        wrench each contact frame exerts on the environment (a loop: its frame a's body on its
        frame b's), LOCAL ``[force; torque]`` (Pinocchio's lambda_c is −F), and
        q̈ = q̈₀ − M⁻¹ J_cᵀ F. See :func:`rbdgen.reference.contact_fd`. Loops also call the
        ``frame_placement`` kernel."""
        key = tuple(contacts) if isinstance(contacts, (list, tuple)) else None
        hit = systems.get(key) if key is not None else None
        if hit is None:
            cs = _check_contacts(model, contacts)
            system = ContactSystem(cs)
            idx = [model.frame_index(f) for f in system.slots]
            hit = (system, idx, idx == list(range(model.nf)))
            if key is not None:
                if len(systems) > 64:
                    systems.clear()
                systems[key] = hit
        system, idx, every = hit
        if "out" in kw:
            raise ValueError("contact_fd: out= is not taken (it returns two new arrays); shape= and stream= are")
        check_finite_state("contact_fd", q=q, v=v, tau=tau)  # else a NaN is reported as a singular posture
        qdd0, J, acc0, vf, Linv = _need(owner, "contact_terms", "contact_fd")(q, v, tau, **kw)
        aba = _need(owner, "aba", "contact_fd")
        Jh, acc0, vf, Linv = (_host(x) for x in (J, acc0, vf, Linv))
        oMf = _host(_need(owner, "frame_placement", "contact_fd with loops")(q, **kw)) if system.has_loops else None
        m = len(idx)
        if not every:
            Jh, acc0, vf, Linv = Jh[..., idx, :, :], acc0[..., idx, :], vf[..., idx, :], Linv[..., idx, :, :, :][..., idx, :]
            oMf = None if oMf is None else oMf[..., idx, :, :]
        W = system.solve(acc0, vf, Linv.reshape(Linv.shape[:-4] + (6 * m, 6 * m)), oMf)
        JtW = (W.reshape(W.shape[:-2] + (1, 6 * m)) @ Jh.reshape(Jh.shape[:-3] + (6 * m, Jh.shape[-1])))[..., 0, :]
        JtW = JtW.astype(Jh.dtype, copy=False)
        tau = np.asarray(tau, dtype=Jh.dtype) if isinstance(tau, (list, tuple)) else tau
        return aba(q, v, tau - _like(tau, JtW), **kw), _like(tau, system.forces(W).astype(Jh.dtype))

    for name, f in (("frame_placement", frame_placement), ("frame_jacobian", frame_jacobian),
                    ("frame_bias_acceleration", frame_bias_acceleration), ("osim_inverse", osim_inverse),
                    ("contact_fd", contact_fd)):
        owner.__dict__[name] = f


#: the least LDLᵀ pivot ratio d_k / S_kk taken as independent rows, by dtype: below it the rows
#: depend on each other at that state (~1/cond(S): the digits lost). The float32 derivatives lose
#: ~cond(S)² × 6e-8 and ask for cond ≲ 1e3
PIVOT_MIN = {"float64": 1e-11, "float32": 1e-5}
PIVOT_MIN_DERIVATIVES = {"float64": 1e-11, "float32": 1e-3}


def _install_constrained(owner, name: str) -> None:
    """``kern.constrained_fd(q, v, tau) → (q̈, F)`` and ``kern.constrained_fd_derivatives(q, v,
    tau) → (q̈, F, ∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ, ∂F/∂q, ∂F/∂v, ∂F/∂τ)``: the generated kernel without
    its pivots output, and a :class:`~rbdgen.ContactError` where the constraint rows depend on
    each other at that state (a pivot ratio under :data:`PIVOT_MIN`; a NaN pivot: the same, or a
    NaN input), never a silent NaN or a solve of a singular system. The generated kernel (pivots
    included) stays reachable as ``kern.kernel(name)``."""
    raw = owner.__dict__[name]
    owner.__dict__[f"_raw_{name}"] = raw
    cons = tuple(getattr(owner.model, "constraints", ()))
    outs = registry.get(name).output_names
    floors = PIVOT_MIN_DERIVATIVES if "dqdd_dq" in outs else PIVOT_MIN
    floor = floors.get(np.dtype(getattr(owner, "dtype", np.float64)).name, 1e-11)
    at_pivots = outs.index("pivots")  # (constrained_fd: q̈, F, pivots; the derivatives: pivots last)

    def method(q, v, tau, **kw):
        out = raw(q, v, tau, **kw)
        piv = out[at_pivots]
        rest = out[:at_pivots] + out[at_pivots + 1:]
        if float(piv.min()) > floor:  # one reduction, ~1 µs; a NaN compares False
            return rest
        ok = ~(_host(piv).reshape(piv.shape[:-2] + (-1,)).min(axis=-1) > floor)
        bad = np.flatnonzero(ok.reshape(-1))
        at = "" if piv.ndim == 2 else f" (state {int(bad[0])} of the batch)"
        which = ", ".join(map(_describe, cons)) or "the model's constraints"
        check_finite_state(name, q=q, v=v, tau=tau)  # a NaN in: that, not "singular"
        raise ContactError(f"{name}: the constraint system is singular{at}: {which} constrain "
                           f"directions the robot cannot move independently at this configuration (an LDLᵀ "
                           f"pivot of S = J_c M⁻¹ J_cᵀ under {floor:g} of its diagonal); kern.contact_fd(q, v, "
                           f"tau, constraints) solves redundant constraints rank-revealing")

    method.__doc__ = raw.__doc__
    owner.__dict__[name] = method


def _like(ref, x):
    """``x`` (numpy) as an array of ``ref``'s kind (numpy, or cupy on the device)."""
    if isinstance(ref, np.ndarray):
        return x
    import cupy

    return cupy.asarray(x)
