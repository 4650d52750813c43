"""The rbdgen version: one place, read by the package, the compile cache key and the manifest."""
__version__ = "0.1.0"
