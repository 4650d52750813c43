"""What every target prints with: the one expression printer (``printer``: a scheduled kernel
as statements, parts and comments, spelled by a target's :class:`~rbdgen.codegen.printer.Dialect`),
the one escaping and validation path for anything from the input that reaches generated code
(``escape``), the template renderer (``render``: Jinja2 over ``templates/``, placing
already-printed text), the sine/cosine code shared by the C++ and CUDA kernels (``trig``) and
:class:`~rbdgen.codegen.sources.Sources`, what a target's generator hands on.

May import the kernel layers (``ir``, ``registry``, ``errors``); never a target, the toolchain,
the loaded kernels or the CLI (tests/test_layout.py checks it).
"""
