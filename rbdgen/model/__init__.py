"""URDF → :class:`RobotModel` (or :class:`CoupledModel` when mimic joints are coupled); a model
joint by joint: :class:`ModelBuilder`."""
from .builder import ModelBuilder
from .coupled import CoupledModel
from .model import JOINT_DIMS, MIMIC_MODES, LinkFrame, RobotModel, load_urdf
from .urdf import read_urdf

__all__ = ["CoupledModel", "JOINT_DIMS", "LinkFrame", "MIMIC_MODES", "ModelBuilder", "RobotModel", "load_urdf",
           "read_urdf"]
