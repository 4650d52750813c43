"""rbdgen: robot-specific rigid-body-dynamics kernels generated from URDF or MJCF (MuJoCo) files."""
from .errors import BuildError, CompilerNotFoundError, MJCFError, RbdgenError, UnsupportedError, URDFError
from .model import (ModelBuilder, RobotModel, load_mjcf, load_model, load_urdf, mujoco_qpos_to_q, mujoco_qvel_to_v,
                    q_to_mujoco_qpos, v_to_mujoco_qvel)
from .reference.contact import Contact, ContactError, Loop


from ._version import __version__


def build(model, target="cpu", dtype="float64", **kw):
    """Generate, compile (cached) and load kernels: see :func:`rbdgen.targets.build`.

    (Imported here on first call: ``import rbdgen`` stays light, no Jinja2 or compiler lookup.)"""
    from .targets import build as _build

    return _build(model, target=target, dtype=dtype, **kw)

__all__ = [
    "BuildError",
    "CompilerNotFoundError",
    "Contact",
    "ContactError",
    "Loop",
    "MJCFError",
    "ModelBuilder",
    "RbdgenError",
    "RobotModel",
    "UnsupportedError",
    "URDFError",
    "build",
    "load_mjcf",
    "load_model",
    "load_urdf",
    "mujoco_qpos_to_q",
    "mujoco_qvel_to_v",
    "q_to_mujoco_qpos",
    "v_to_mujoco_qvel",
    "__version__",
]
