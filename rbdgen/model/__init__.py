"""URDF → :class:`RobotModel` (or :class:`CoupledModel` when mimic joints are coupled); MJCF →
:class:`RobotModel` (:func:`load_mjcf`; either by content: :func:`load_model`); a model joint by
joint: :class:`ModelBuilder`."""
from .builder import ModelBuilder
from .coupled import CoupledModel
from .model import JOINT_DIMS, MIMIC_MODES, LinkFrame, RobotModel, load_urdf
from .mjcf import load_mjcf, load_model, mujoco_qpos_to_q, mujoco_qvel_to_v, q_to_mujoco_qpos, v_to_mujoco_qvel
from .urdf import read_urdf

__all__ = ["CoupledModel", "JOINT_DIMS", "LinkFrame", "MIMIC_MODES", "ModelBuilder", "RobotModel", "load_mjcf",
           "load_model", "load_urdf", "mujoco_qpos_to_q", "mujoco_qvel_to_v", "q_to_mujoco_qpos", "read_urdf",
           "v_to_mujoco_qvel"]
