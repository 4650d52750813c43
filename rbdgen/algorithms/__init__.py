"""Dynamics algorithms traced into kernel IR."""
from .kernels import KERNELS, trace

__all__ = ["KERNELS", "trace"]
