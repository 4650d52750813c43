"""One exception family for everything a user can get wrong.

Every message names the file (when there is one), the element, and what is wrong, so the CLI
can print it as a single line: ``error: <file>: <message>``.
"""
from __future__ import annotations


class RbdgenError(Exception):
    """Base class of every error rbdgen raises on purpose."""

    def __init__(self, message: str, *, file: str | None = None):
        self.file = None if file is None else str(file)
        self.message = message
        super().__init__(f"{self.file}: {message}" if self.file else message)


class URDFError(RbdgenError):
    """The URDF cannot be read, or describes something that is not a valid robot."""


class MJCFError(RbdgenError):
    """The MJCF (MuJoCo XML) file cannot be read, or describes something that is not a valid
    robot (the message names the line and element)."""


class UnsupportedError(RbdgenError):
    """Valid input that rbdgen deliberately does not handle (the message says what to do)."""


class BuildError(RbdgenError):
    """Generating, compiling or loading a kernel failed."""


class CompilerNotFoundError(BuildError):
    """The compiler a target needs is not installed."""


class RbdgenWarning(UserWarning):
    """Something in the input looks wrong but does not change the results (e.g. a non-physical
    inertia on a link that is lumped into a body whose total inertia is physical)."""
