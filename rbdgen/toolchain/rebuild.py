"""Pickling loaded kernels: what a pickle carries, and how another process rebuilds them.

``pickle.dumps(kern)`` (and cloudpickle, which dask uses) carries the *recipe* of a kernel set,
never the loaded library: the target (by name: the registered target is what unpickling
returns, :meth:`rbdgen.targets.base.Target.__reduce__`), the generated source files that its loader
compiled (only those of the loaded dtype; zlib-compressed), the manifest facts (kernel entries,
the target's ``info``, the prefix), the model (a :class:`~rbdgen.model.RobotModel`, or a
package's :class:`~rbdgen.package.load.PackageModel`), the dtype and the compile options the
kernels were loaded with (``opt``, ``march``, ``cxx``; cuda: ``arch``, ``nvcc``, …).

``pickle.loads`` hands the recipe to the same target loader that :func:`rbdgen.build` and
:func:`rbdgen.package.load_package` use — the content-addressed compile cache
(:func:`rbdgen.toolchain.compiler.build_library`): on a machine whose cache holds the library it is
just loaded; elsewhere the carried sources are compiled (once per machine, under the cache's
lock, so the workers of one machine wait for one build). Nothing is traced again. A compile
option left at its default is resolved where the pickle is loaded (``cxx``: that machine's
``$CXX`` or g++; cuda ``arch``: its GPUs).

Within one process, loading the same recipe again returns the kernels already rebuilt from it
(while they are alive): a dask worker that receives the kernels with every task rebuilds them
once.
"""
from __future__ import annotations

import hashlib
import pickle
import threading
import weakref
import zlib

from ..codegen.sources import Sources
from ..errors import BuildError, RbdgenError

#: bump when the payload's layout changes: an old pickle is then refused with a clear message
#: (2: the payload carries the target itself, which pickles as its name, not the name)
FORMAT = 2
_ATTR = "_rbdgen_recipe"


class _Recording(dict):
    """A dict that remembers which keys were read: which source files a target's loader used."""

    def __init__(self, *a):
        super().__init__(*a)
        self.used = set()

    def __getitem__(self, key):
        self.used.add(key)
        return super().__getitem__(key)


class Recipe:
    """How to load a kernel set again: a target loader's arguments, minus the progress callback."""

    __slots__ = ("target", "sources", "model", "dtype", "options", "_payload", "_digest")

    def __init__(self, target, sources, model, dtype, options, payload=None, digest=None):
        self.target, self.sources, self.model, self.dtype = target, sources, model, dtype
        self.options = options
        self._payload, self._digest = payload, digest

    def payload(self):
        """(digest, compressed blob): computed once per recipe."""
        if self._payload is None:
            s = self.sources
            body = pickle.dumps({"target": self.target, "prefix": s.prefix, "files": dict(s.files),
                                 "kernels": s.kernels, "info": s.info, "dtypes": s.dtypes, "source_target": s.target,
                                 "model": self.model, "dtype": self.dtype, "options": self.options},
                                protocol=pickle.HIGHEST_PROTOCOL)
            self._payload = zlib.compress(body, 6)
            self._digest = hashlib.sha256(self._payload).hexdigest()
        return self._digest, self._payload


def load(target, sources, model, dtype, *, progress=None, **options):
    """``target.load(sources, model, dtype, …)``, remembering on the kernels what it compiled
    (the source files it read), so that they can be pickled."""
    files = _Recording(sources.files)
    rec_sources = Sources(sources.target, sources.prefix, files, sources.kernels, sources.info, sources.dtypes)
    kern = target.load(rec_sources, model, dtype, progress=progress, **options)
    kept = {fn: dict.__getitem__(files, fn) for fn in sorted(files.used)}
    src = Sources(sources.target, sources.prefix, kept, sources.kernels, sources.info, sources.dtypes)
    try:
        kern.__dict__[_ATTR] = Recipe(target, src, model, dtype, dict(options))
    except AttributeError:  # an object without a __dict__: not picklable, said when pickled
        pass
    return kern


def reduce(kern):
    """``__reduce__`` of loaded kernels: rebuild from the recipe (see the module docstring)."""
    recipe = kern.__dict__.get(_ATTR)
    if recipe is None:
        raise pickle.PicklingError(
            f"cannot pickle {kern!r}: it was not loaded by rbdgen.build or rbdgen.package.load_package, so the "
            "sources it was compiled from are unknown (load it through one of those to pickle it)")
    digest, blob = recipe.payload()
    return _rebuild, (FORMAT, digest, blob)


_rebuilt: "weakref.WeakValueDictionary[str, object]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the kernels rebuilt in this process (the next unpickling loads them again)."""
    with _lock:
        _rebuilt.clear()


def _rebuild(fmt, digest, blob):
    if fmt != FORMAT:
        raise RbdgenError(f"these pickled rbdgen kernels have format {fmt}, this rbdgen reads format {FORMAT}; "
                          "pickle them again with this rbdgen version")
    with _lock:
        kern = _rebuilt.get(digest)
        if kern is not None:
            return kern
        try:
            d = pickle.loads(zlib.decompress(blob))  # the target: looked up in this process's registry
        except RbdgenError as e:  # e.g. a target this rbdgen does not have
            raise RbdgenError(f"cannot rebuild pickled rbdgen kernels in this process: {e}") from e
        except Exception as e:  # noqa: BLE001 - a damaged payload, whatever the error
            raise RbdgenError(f"pickled rbdgen kernels are damaged ({type(e).__name__}: {e})") from e
        src = Sources(d["source_target"], d["prefix"], d["files"], d["kernels"], d["info"], d["dtypes"])
        target = d["target"]
        what = f"{target.name} kernels of {getattr(d['model'], 'name', '?')!r} ({d['dtype']}: {', '.join(d['kernels'])})"
        if not d["files"]:
            raise RbdgenError(f"cannot rebuild the pickled {what}: the pickle carries no source files")
        try:
            kern = target.load(src, d["model"], d["dtype"], **d["options"])
        except BuildError as e:  # a cache miss here, and no compiler or a failed compile
            raise type(e)(f"cannot rebuild the pickled {what} in this process: the compile cache "
                          f"does not hold their library and compiling the carried sources failed: {e}") from e
        except RbdgenError as e:
            raise RbdgenError(f"cannot rebuild the pickled {what} in this process: {e}") from e
        kern.__dict__[_ATTR] = Recipe(target, src, d["model"], d["dtype"], d["options"], blob, digest)
        _rebuilt[digest] = kern
        return kern
