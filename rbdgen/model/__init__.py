"""URDF → :class:`RobotModel` (or :class:`CoupledModel` when mimic joints are coupled)."""
from .coupled import CoupledModel
from .model import JOINT_DIMS, MIMIC_MODES, LinkFrame, RobotModel, load_urdf
from .urdf import read_urdf

__all__ = ["CoupledModel", "JOINT_DIMS", "LinkFrame", "MIMIC_MODES", "RobotModel", "load_urdf", "read_urdf"]
