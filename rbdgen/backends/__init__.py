"""Backends: the kernel IR printed for a target (cpu now; cuda and hls share the printer)."""
from .cpu import generate_cpu
from .printer import Dialect, print_kernel

__all__ = ["Dialect", "generate_cpu", "print_kernel"]
