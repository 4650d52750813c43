"""rbdgen: robot-specific rigid-body-dynamics kernels generated from URDF."""
from .errors import BuildError, CompilerNotFoundError, RbdgenError, UnsupportedError, URDFError
from .model import RobotModel, load_urdf

__version__ = "0.1.0"

__all__ = [
    "BuildError",
    "CompilerNotFoundError",
    "RbdgenError",
    "RobotModel",
    "UnsupportedError",
    "URDFError",
    "load_urdf",
    "__version__",
]
