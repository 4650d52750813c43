"""Kernel IR: traced expression graphs, their op counts, and a NumPy interpreter."""
from .graph import Array, Block, Graph, Kernel, Value
from .interp import run

__all__ = ["Array", "Block", "Graph", "Kernel", "Value", "run"]
