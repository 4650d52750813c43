"""URDF → :class:`RobotModel`."""
from .model import JOINT_DIMS, RobotModel, load_urdf
from .urdf import read_urdf

__all__ = ["JOINT_DIMS", "RobotModel", "load_urdf", "read_urdf"]
