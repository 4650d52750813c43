"""The generation cache: a warm :func:`rbdgen.build` neither traces nor prints.

The compile cache (:func:`rbdgen.toolchain.compiler.build_library`) is keyed by the generated sources,
so finding a library there needs the sources first, and generating them is most of a warm
build: tracing and printing TALOS's 22 kernels takes 5.7 s, loading the cached library 0.05 s.
This cache maps what determines the sources to the sources themselves, so that a process that
builds kernels it (or another process on the machine) built before skips generation.

The key (SHA-256) covers everything the sources are a function of:

* the generator itself: the bytes of every ``.py`` file of the rbdgen package and of every
  template, and the versions of Python, NumPy and Jinja2 (a changed generator, even an
  uncommitted edit, is a different key; no version number is trusted);
* the target's name and its modules' UPPER_CASE settings (:meth:`Target.generation_salt`; a
  test or a study that monkeypatches one gets sources generated with it);
* the model (its pickle: names, numbers, frames and options, all of it), the kernels asked for,
  the dtype, the package name, ``fold`` and the target's generate-stage options.

Entries are JSON (the :class:`~rbdgen.codegen.sources.Sources` fields and the entry's own key),
zlib-compressed, after one line that holds the SHA-256 of the compressed bytes; written
atomically beside the compile cache (``$RBDGEN_CACHE_DIR/generated/``); a cache that cannot be
written is skipped. A damaged entry is a miss, and the generation that follows writes it again
(issue 46). zlib alone was not enough: a truncated, empty or garbage entry failed to inflate, but
its Adler-32 let 2 of 52 539 single-bit flips of an iiwa ``rnea`` entry through (each changed
three characters of the C++ and kept the sum), and those sources were compiled; an entry that
holds another key's entry (a cache put together by hand) was a hit too. Now the digest is
checked before inflating (1.2-1.3 ms for TALOS's 2.1-2.4 MB entries, which inflate in 33-38 ms),
and the key after.
Set ``RBDGEN_GENERATION_CACHE=0`` to always generate (the compile cache still applies).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import sys
import zlib
from pathlib import Path

from .. import registry
from ..codegen.sources import Sources
from .compiler import cache_dir, write_atomic

#: bump when an entry's layout changes (2: a first line with the SHA-256, the entry records its key)
FORMAT = 2
ENV = "RBDGEN_GENERATION_CACHE"


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "no", "off", "false")


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 of the generator: rbdgen's Python files and templates, and the versions of the
    libraries the printing goes through."""
    import jinja2
    import numpy
    from importlib import resources

    h = hashlib.sha256(tree_digest([("rbdgen", Path(__file__).resolve().parent.parent, "*.py"),
                                    ("templates", Path(str(resources.files("rbdgen.templates"))), "*")]).encode())
    h.update(f"python {sys.version_info[:3]} numpy {numpy.__version__} jinja2 {jinja2.__version__}".encode())
    return h.hexdigest()


def tree_digest(roots) -> str:
    """SHA-256 of the files matching each (label, folder, pattern) of ``roots``: their paths and bytes."""
    h = hashlib.sha256()
    for label, root, pattern in roots:
        for p in sorted(root.rglob(pattern)):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(f"{label}/{p.relative_to(root).as_posix()}\0".encode() + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(target, model, kernels, dtype, name, fold, options: dict) -> str | None:
    """The cache key of generating ``kernels`` of ``model`` for ``target``, or None when the
    model cannot be pickled (then nothing is cached)."""
    try:
        model_bytes = pickle.dumps(model, protocol=4)
    except Exception:
        return None
    decls = _declarations(model, kernels)
    if decls is None:
        return None
    h = hashlib.sha256()
    for part in (f"rbdgen-generated {FORMAT}", code_digest(), decls, target.name, target.generation_salt(),
                 repr(None if kernels is None else tuple(kernels)), str(dtype), repr(name), repr(bool(fold)),
                 repr(sorted((k, repr(v)) for k, v in options.items()))):
        h.update(part.encode() + b"\0")
    h.update(model_bytes)
    return h.hexdigest()[:32]


def _declarations(model, kernels) -> str | None:
    """The kernels ``kernels`` resolves to, and for each declared outside rbdgen (a user's
    :func:`rbdgen.registry.declare`) the digest of the file that declares it; None when such a
    declaration has no file (an interactive session: then nothing is cached)."""
    import inspect

    own = Path(__file__).resolve().parent.parent
    out = []
    for name in registry.applicable(model, kernels):
        fn = registry.get(name).algorithm
        mod = sys.modules.get(getattr(fn, "__module__", None) or "")
        path = getattr(mod, "__file__", None)
        if path is None:
            return None
        path = Path(path).resolve()
        if own in path.parents:
            out.append(name)
            continue
        try:
            src = Path(inspect.getsourcefile(fn) or path).read_bytes()
        except (OSError, TypeError):
            return None
        out.append(f"{name}:{hashlib.sha256(src).hexdigest()}")
    return ",".join(out)


def _path(k: str) -> Path:
    return cache_dir() / "generated" / f"{k}.json.zz"


def _header(data: bytes) -> bytes:
    """The first line of an entry whose compressed JSON is ``data``: the format and its SHA-256."""
    return f"rbdgen-generated {FORMAT} sha256 {hashlib.sha256(data).hexdigest()}".encode()


def load(k: str):
    """The cached Sources of key ``k``, or None: missing, damaged (truncated, flipped bits, another
    key's entry) or of another layout; the caller then generates again and rewrites it."""
    try:
        head, _, data = _path(k).read_bytes().partition(b"\n")
        if head != _header(data):
            return None
        d = json.loads(zlib.decompress(data))
        if d["key"] != k:
            return None
        return Sources(d["target"], d["prefix"], d["files"], d["kernels"], d["info"], tuple(d["dtypes"]))
    except Exception:  # missing, from an incompatible layout: generate again
        return None


def store(k: str, sources) -> None:
    """Write ``sources`` under key ``k`` (atomically; silently skipped when the cache is not writable)."""
    p = _path(k)
    data = zlib.compress(json.dumps({
        "key": k, "target": sources.target, "prefix": sources.prefix, "files": dict(sources.files),
        "kernels": sources.kernels, "info": sources.info, "dtypes": list(sources.dtypes)}, sort_keys=True).encode(), 6)
    write_atomic(p, _header(data) + b"\n" + data)


def sources(target, model, kernels, dtype, name, fold, options: dict, generate, progress=None):
    """``generate()``'s Sources, from the cache when an entry of the same key is there."""
    k = key(target, model, kernels, dtype, name, fold, options) if enabled() else None
    if k is not None:
        hit = load(k)
        if hit is not None:
            if progress:
                progress("generated sources: cached")
            return hit
    src = generate()
    if k is not None:
        store(k, src)
    return src
