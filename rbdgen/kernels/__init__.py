"""The loaded kernels, whatever target compiled them: the object with one method per kernel and
its argument checks (``loaded``: :class:`~rbdgen.kernels.loaded.CompiledKernels` over any C
ABI), array interchange without copies (``interop``: DLPack, strided rows, output buffers), the
by-name frame and contact methods (``frames``) and the stale-data kernels' start state
(``stale``). A target's loader builds on these (the CUDA and HLS loaders subclass or reuse them).

May import the reference (contact solves), ``toolchain.rebuild`` (pickling) and ``errors``;
never a target or the CLI (tests/test_layout.py checks it).
"""
