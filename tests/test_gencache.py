"""The generation cache (rbdgen.toolchain.gencache): a warm rbdgen.build skips tracing and printing,
and every input of the generation changes its key."""
from __future__ import annotations

import json

import pytest

import rbdgen
import rbdgen.robots
from rbdgen.targets import get_target
from rbdgen.targets.cpu import CpuTarget
from rbdgen.targets.cpu import emit as cpu
from rbdgen.toolchain import gencache

from conftest import TOL64, kernel_args, kernel_err, random_state, ref_out

IIWA = rbdgen.robots.path("iiwa14")


@pytest.fixture()
def counted(monkeypatch, tmp_path):
    """A fresh cache folder, and the number of times the CPU target generated sources."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(gencache.ENV, raising=False)
    calls = []
    orig = CpuTarget.generate

    def generate(self, *a, **kw):
        calls.append(1)
        return orig(self, *a, **kw)

    monkeypatch.setattr(CpuTarget, "generate", generate)
    return calls


def _check(kern, model):
    q, v, a, tau = random_state(model, seed=5)
    args = kernel_args("gravity", q, v, a, tau)
    assert kernel_err(kern.gravity(*args), ref_out(model, "gravity", *args)) <= TOL64


def test_warm_build_does_not_generate(counted, monkeypatch, tmp_path):
    model = rbdgen.load_urdf(IIWA)
    kw = dict(kernels=("gravity",), opt="-O1", march="portable")
    _check(rbdgen.build(model, **kw), model)
    assert len(counted) == 1
    _check(rbdgen.build(model, **kw), model)
    assert len(counted) == 1, "the second build generated again"
    entries = list((tmp_path / "generated").glob("*.json.zz"))
    assert len(entries) == 1
    # switched off: generates (the compile cache still holds the library)
    monkeypatch.setenv(gencache.ENV, "0")
    _check(rbdgen.build(model, **kw), model)
    assert len(counted) == 2
    monkeypatch.delenv(gencache.ENV)
    # a module-level setting of the target is part of the key
    large = cpu.LARGE_STATEMENTS
    monkeypatch.setattr(cpu, "LARGE_STATEMENTS", large - 1)
    _check(rbdgen.build(model, **kw), model)
    assert len(counted) == 3
    monkeypatch.setattr(cpu, "LARGE_STATEMENTS", large)
    # a damaged entry is a miss, not an error
    entries[0].write_bytes(b"not zlib")
    _check(rbdgen.build(model, **kw), model)
    assert len(counted) == 4
    _check(rbdgen.build(model, **kw), model)
    assert len(counted) == 4, "the entry written after the damaged one was not used"


def test_key_covers_every_input():
    t = get_target("cpu")
    fixed = rbdgen.load_urdf(IIWA)
    base = (t, fixed, ("rnea",), "float64", None, True, {"lanes": 4})
    k0 = gencache.key(*base)
    assert k0 == gencache.key(*base)
    variants = [
        (t, rbdgen.load_urdf(IIWA, floating_base=True), ("rnea",), "float64", None, True, {"lanes": 4}),
        (t, fixed.with_frames(["iiwa_link_ee"]), ("rnea",), "float64", None, True, {"lanes": 4}),
        (t, fixed, ("rnea", "crba"), "float64", None, True, {"lanes": 4}),
        (t, fixed, ("rnea",), "float32", None, True, {"lanes": 4}),
        (t, fixed, ("rnea",), "float64", "arm", True, {"lanes": 4}),
        (t, fixed, ("rnea",), "float64", None, False, {"lanes": 4}),
        (t, fixed, ("rnea",), "float64", None, True, {"lanes": 2}),
    ]
    keys = {gencache.key(*v) for v in variants}
    assert len(keys) == len(variants) and k0 not in keys


def test_key_covers_the_generator(monkeypatch):
    t = get_target("cpu")
    args = (t, rbdgen.load_urdf(IIWA), ("rnea",), "float64", None, True, {})
    k0 = gencache.key(*args)
    monkeypatch.setattr(gencache, "code_digest", lambda: "an edited rbdgen")
    assert gencache.key(*args) != k0


def test_generator_digest_covers_every_file(tmp_path):
    """Any edit to a template or module (content, a new file, a rename) changes the digest."""
    from importlib import resources
    import shutil

    tree = tmp_path / "templates"
    shutil.copytree(str(resources.files("rbdgen.templates")), tree)
    roots = [("templates", tree, "*")]
    d0 = gencache.tree_digest(roots)
    assert gencache.tree_digest(roots) == d0
    f = tree / "cpu" / "kernels.cpp.j2"
    f.write_text(f.read_text() + " ")
    d1 = gencache.tree_digest(roots)
    (tree / "cpu" / "new.j2").write_text("")
    d2 = gencache.tree_digest(roots)
    f.rename(tree / "cpu" / "renamed.j2")
    d3 = gencache.tree_digest(roots)
    assert len({d0, d1, d2, d3}) == 4


def test_entries_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    t = get_target("cpu")
    model = rbdgen.load_urdf(IIWA)
    src = t.generate(model, ("rnea", "crba"), dtypes=("float64",), name=None, lanes=4)
    gencache.store("k" * 32, src)
    back = gencache.load("k" * 32)
    norm = lambda s: json.loads(json.dumps([s.target, s.prefix, s.files, s.kernels, s.info, list(s.dtypes)]))
    assert norm(back) == norm(src)
    assert back.files == src.files  # byte for byte
    assert gencache.load("m" * 32) is None


def test_salt_holds_the_targets_settings(monkeypatch):
    """A monkeypatched module-level setting (CPU part sizes, CUDA's local-memory limit) changes
    the target's salt, so a cached entry generated without it is not used."""
    from rbdgen.targets.cuda import emit as cuda

    for target, mod, name in (("cpu", cpu, "PARTS_PER_SOURCE"), ("cuda", cuda, "THREAD_LOCAL_LIMIT")):
        t = get_target(target)
        s0 = t.generation_salt()
        assert s0 == t.generation_salt()
        monkeypatch.setattr(mod, name, getattr(mod, name) + 1)
        assert t.generation_salt() != s0
    # HLS generation warns (ports, DSP budgets): it is not cached, so the warnings come every build
    assert not get_target("hls").cache_generation


def test_key_is_the_same_in_every_process():
    """The key a new process computes is the one this process stored under, whatever the string
    hash seed (a set's order follows it: an unsorted set in the key made every warm build miss)."""
    import os
    import subprocess
    import sys

    script = ("import rbdgen, rbdgen.robots\n"
              "from rbdgen.targets.base import get_target\n"
              "from rbdgen.toolchain import gencache\n"
              "m = rbdgen.load_urdf(rbdgen.robots.path('iiwa14'))\n"
              "print([gencache.key(get_target(t), m, ('rnea',), 'float64', None, True, {}) for t in ('cpu', 'cuda')])")
    keys = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2, 3)}
    assert len(keys) == 1, keys
