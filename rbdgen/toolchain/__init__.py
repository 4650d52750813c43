"""Compiling and caching, for every target: the compiler runner and the content-addressed compile
cache with its locks (``compiler``: g++ flags, ``-march`` resolution, ``build_library``), the
generation cache that lets a warm build skip tracing (``gencache``), and the recipe that rebuilds
pickled kernels in another process (``rebuild``). A target's own toolchain step (nvcc, the HLS C
simulation's flags) lives in its folder and calls into this one.

May import ``codegen`` (for :class:`~rbdgen.codegen.sources.Sources`), the kernel registry and
``errors``; never a target, the loaded kernels or the CLI (tests/test_layout.py checks it): a
target reaches it with itself as an argument (the caches key on it, a pickle names it).
"""
