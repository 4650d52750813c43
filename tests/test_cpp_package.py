"""A generated CPU package is a CMake project (issue 45, docs/cpp.md): C++ users build and link it
without Python, and get the reference's numbers.

For the iiwa (fixed base, ∇FD's part sources and looped product included) and the floating
quadruped, generated into a temporary folder:

* the package alone (the top-level project): built with its default flags, its example program
  runs, ``cmake --install`` into a temporary prefix;
* a consumer project outside the package with ``find_package(rbd_<name>)`` on that prefix, one
  with ``add_subdirectory`` (shared library, ``-O1`` through the package's CMake variable), and a
  one-file program compiled with ``g++ $(pkg-config --cflags --libs rbd_<name>)``: each runs a
  program that prints every kernel's outputs (one state, one state with a NaN-filled workspace
  of the caller's, and a batch whose size is no multiple of the SIMD lanes, in rows and states
  last) and the header's
  names, compared here with rbdgen.reference and the model;
* no compile command has Python's or NumPy's include folder, or compiles the Python binding;
  rbdgen's flags are on the command lines (-std=c++17, -fno-math-errno, -Os for the parts).

cmake is the venv's (pyproject's test extra installs it: the image's may be missing or old); a
missing cmake fails the test. CMAKE_BUILD_PARALLEL_LEVEL=2: the two CI cores.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen.cli import main

from conftest import TOL64, kernel_args, kernel_err, random_state, ref_out

#: (package name, URDF, generate flags, kernels): a few kernels each, to keep the builds short
PACKAGES = {
    "iiwa14": (rbdgen.robots.path("iiwa14"), [], ["rnea", "crba", "aba", "aba_derivatives"]),
    "quadruped": (rbdgen.robots.path("quadruped"), ["--floating-base"], ["rnea", "crba", "aba"]),
}
N_STATES = 11  # not a multiple of any lanes: the batch's scalar tail runs too
TIMEOUT = 600


def _tool(name: str) -> str | None:
    """``name`` from the venv's bin folder first, then PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which(name, path=path)


def _cmake() -> str:
    exe = _tool("cmake")
    if exe is None:
        pytest.fail("cmake not found in the venv or on PATH: pyproject.toml's test extra installs it "
                    "(cmake>=3.24; `make venv`, or pip install -e '.[test]')")
    return exe


def _run(cmd, cwd=None, **kw) -> str:
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL="2")
    env.pop("CMAKE_GENERATOR", None)  # the default generator (Unix Makefiles): ninja is not needed
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    assert r.returncode == 0, f"{shlex.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _consumer_source(m: dict) -> str:
    """A C++ program that reads N states (q, v, a, tau) from stdin and prints, per kernel, its
    outputs for each state one at a time, the same with the caller's workspace (filled with NaN:
    the kernel must write every value it reads), and as one batch in rows and one states last
    (leading dimension n + 3); then the header's names (hex)."""
    p, nq, nv = m["prefix"], m["nq"], m["nv"]
    offset = {"q": nq, "v": nv, "a": nv, "tau": nv}
    out = [f'#include "{p}.h"', "#include <cmath>", "#include <cstdio>", "#include <vector>", "",
           "static void put(const char* k, const char* mode, const std::vector<double>& x) {",
           '  std::printf("%s %s", k, mode);',
           '  for (double y : x) std::printf(" %.17g", y);',
           '  std::printf("\\n");', "}",
           "static void hex(const char* what, const char* s) {",
           '  std::printf("name %s ", what);',
           '  for (; *s; ++s) std::printf("%02x", (unsigned)(unsigned char)*s);',
           '  std::printf("\\n");', "}", "",
           "int main() {", "  long n;", '  if (std::scanf("%ld", &n) != 1) return 2;',
           f"  std::vector<double> q(n * {nq}), v(n * {nv}), a(n * {nv}), tau(n * {nv});",
           "  for (auto* x : {&q, &v, &a, &tau})",
           '    for (auto& y : *x) if (std::scanf("%lf", &y) != 1) return 2;']
    for k in m["kernel_order"]:
        ins = [i["name"] for i in m["kernels"][k]["inputs"]]
        outs = [(o["name"], int(np.prod(o["shape"]))) for o in m["kernels"][k]["outputs"]]
        f = f"{p}_{k}_f64"
        out.append("  {")
        out.append(f"    if ({f.upper()}_WORKSPACE != {f}_workspace_size()) return 3;")
        out.append(f"    std::vector<double> work({f}_workspace_size(), NAN);")
        for mode in ("single", "ws", "batch", "lanes"):
            for o, size in outs:
                out.append(f"    std::vector<double> {o}_{mode}(n * {size});")
        one_in = ", ".join(f"&{x}[i * {offset[x]}]" for x in ins)
        one_out = lambda mode: ", ".join(f"&{o}_{mode}[i * {size}]" for o, size in outs)  # noqa: E731
        out.append(f"    for (long i = 0; i < n; ++i) {f}({one_in}, {one_out('single')});")
        out.append(f"    for (long i = 0; i < n; ++i) {f}_ws({one_in}, {one_out('ws')}, work.data());")
        out.append(f"    {f}_batch(n, {', '.join(f'{x}.data()' for x in ins)}, "
                   f"{', '.join(f'{o}_batch.data()' for o, _ in outs)});")
        # the states-last entry point: leading dimension n + 3, transposed in and out here
        out.append("    const long ld = n + 3;")
        for x in ins:
            out.append(f"    std::vector<double> {x}_t({offset[x]} * ld, NAN);")
            out.append(f"    for (long i = 0; i < n; ++i) for (long j = 0; j < {offset[x]}; ++j) "
                       f"{x}_t[j * ld + i] = {x}[i * {offset[x]} + j];")
        for o, size in outs:
            out.append(f"    std::vector<double> {o}_t({size} * ld, NAN);")
        out.append(f"    {f}_batch_lanes(n, {', '.join(f'{x}_t.data(), ld' for x in ins)}, "
                   f"{', '.join(f'{o}_t.data(), ld' for o, _ in outs)});")
        for o, size in outs:
            out.append(f"    for (long i = 0; i < n; ++i) for (long j = 0; j < {size}; ++j) "
                       f"{o}_lanes[i * {size} + j] = {o}_t[j * ld + i];")
        for mode in ("single", "ws", "batch", "lanes"):
            for o, _ in outs:
                out.append(f'    put("{k}/{o}", "{mode}", {o}_{mode});')
        out.append("  }")
    out += [f"  namespace r = {p};",
            f"  if (r::nq != {p.upper()}_NQ || r::nv != {p.upper()}_NV || r::nb != {p.upper()}_NB) return 4;",
            '  hex("robot", r::robot_name);',
            '  for (int i = 0; i < r::nb; ++i) { hex("joint", r::joint_names[i]); hex("body", r::body_names[i]);',
            '    std::printf("layout %d %d %d %d\\n", r::joint_q_index[i], r::joint_nq[i], r::joint_v_index[i], '
            'r::joint_nv[i]); }']
    if m["frames"]:
        out.append('  for (int i = 0; i < r::nf; ++i) hex("frame", r::frame_names[i]);')
    out += ["  return 0;", "}", ""]
    return "\n".join(out)


def _check_output(text: str, m: dict, model, states) -> None:
    """The program's numbers against the reference, its names against the model's."""
    q, v, a, tau = states
    got, names, layout = {}, {"robot": [], "joint": [], "body": [], "frame": []}, []
    for line in text.splitlines():
        w = line.split()
        if w[0] == "name":
            names[w[1]].append(bytes.fromhex(w[2] if len(w) > 2 else "").decode("utf-8"))
        elif w[0] == "layout":
            layout.append(tuple(map(int, w[1:])))
        else:
            got[(w[0], w[1])] = np.array([float(x) for x in w[2:]])
    for k in m["kernel_order"]:
        args = kernel_args(k, q, v, a, tau, model)
        exp = ref_out(model, k, *args)
        exp = exp if isinstance(exp, tuple) else (exp,)
        for mode in ("single", "ws", "batch", "lanes"):
            outs = tuple(got[(f"{k}/{o['name']}", mode)].reshape(N_STATES, *o["shape"])
                         for o in m["kernels"][k]["outputs"])
            err = kernel_err(outs, exp)
            assert err <= TOL64, f"{k} ({mode}): error {err:.3g} against the reference"
        # the workspace call runs the same code as the single-state one: the same bits
        for o in m["kernels"][k]["outputs"]:
            assert np.array_equal(got[(f"{k}/{o['name']}", "ws")], got[(f"{k}/{o['name']}", "single")]), k
    assert names["robot"] == [model.name]
    assert names["joint"] == list(model.joint_names) and names["body"] == list(model.body_names)
    assert names["frame"] == list(model.frames)
    assert layout == [(model.q_start[b], model.nq_joint(b), model.v_start[b], model.nv_joint(b))
                      for b in range(model.nb)]


def _states_text(model, states) -> str:
    q, v, a, tau = states
    return f"{N_STATES}\n" + "\n".join(" ".join(repr(float(x)) for x in arr.ravel()) for arr in (q, v, a, tau)) + "\n"


def _compile_commands(build: Path) -> list:
    return [c["command"] if "command" in c else shlex.join(c["arguments"])
            for c in json.loads((build / "compile_commands.json").read_text())]


def _no_python(commands: list) -> None:
    """No Python (or NumPy) header folder on any include path, and no Python binding compiled."""
    import numpy

    folders = {sysconfig.get_paths()["include"], numpy.get_include()}
    for c in commands:
        assert not any(f in c for f in folders), f"a Python header folder on a compile line: {c}"
        assert "_python_" not in c, f"the Python binding was compiled: {c}"


def _pkg_config_flags(prefix: Path, name: str) -> list:
    """``pkg-config --cflags --libs name`` over the installed .pc file (pkg-config or pkgconf from
    PATH; where neither is installed, the file's variables and fields read here, which is all a
    .pc file without Requires is)."""
    (pcdir,) = prefix.glob("lib*/pkgconfig")
    tool = _tool("pkg-config") or _tool("pkgconf")
    if tool:
        env = dict(os.environ, PKG_CONFIG_PATH=str(pcdir))
        r = subprocess.run([tool, "--cflags", "--libs", name], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return shlex.split(r.stdout)
    text = (pcdir / f"{name}.pc").read_text()
    var = {"pcfiledir": str(pcdir)}
    fields = {}
    expand = lambda s: re.sub(r"\$\{(\w+)\}", lambda mm: var[mm.group(1)], s)  # noqa: E731
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if m := re.match(r"^(\w+)=(.*)$", line):
            var[m.group(1)] = expand(m.group(2).strip())
        elif m := re.match(r"^([\w.]+):(.*)$", line):
            fields[m.group(1)] = expand(m.group(2).strip())
    return shlex.split(fields.get("Cflags", "")) + shlex.split(fields.get("Libs", ""))


@pytest.mark.parametrize("name", list(PACKAGES))
def test_cmake_package_builds_installs_and_matches_reference(name, tmp_path, capsys):
    cmake = _cmake()
    urdf, flags, kernels = PACKAGES[name]
    rc = main(["generate", str(urdf), *flags, "--dtype", "float64", "--kernels", ",".join(kernels),
               "--out", str(tmp_path), "--name", name, "--quiet"])
    assert rc == 0, capsys.readouterr().err
    pkg = tmp_path / name
    m = json.loads((pkg / "manifest.json").read_text())
    prefix, upper = m["prefix"], m["prefix"].upper()
    model = rbdgen.load_urdf(urdf, floating_base="--floating-base" in flags)
    states = random_state(model, seed=7, n=N_STATES)
    stdin = _states_text(model, states)
    # the package lists what it builds from, and the CMake project builds exactly that, Python's binding aside
    listed = re.findall(r"^  (\S+\.cpp)$", (pkg / "CMakeLists.txt").read_text(), re.M)
    assert sorted(s for s in listed if "_python_" not in s) == sorted(m["target"]["sources"]["float64"])

    # 1. the package alone, default flags; its example; installed into a prefix
    b0, inst = tmp_path / "b0", tmp_path / "prefix"
    _run([cmake, "-S", pkg, "-B", b0, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", "-DCMAKE_BUILD_TYPE=Release"])
    _run([cmake, "--build", b0])
    commands = _compile_commands(b0)
    _no_python(commands)
    for c in commands:
        assert "-std=c++17" in c.split() and "-ffast-math" not in c
        if f"{prefix}_example" not in c:
            assert "-fno-math-errno" in c.split() and "-march=" not in c  # portable by default
            # rbdgen's level decides: after CMake's Release -O3 (the last -O flag wins)
            level = [f for f in c.split() if re.fullmatch(r"-O[0-3s]", f)][-1]
            assert level == ("-Os" if "_parts" in c else "-O3"), c
            looped = Path(c.split()[-1]).name in m["target"]["looped_sources"]["float64"]  # (the source is last)
            assert ("-fno-tree-slp-vectorize" in c.split()) != looped, c
    assert "largest difference" in _run([b0 / f"{prefix}_example"])
    _run([cmake, "--install", b0, "--prefix", inst])
    # lib, or lib64 where GNUInstallDirs says so
    assert (inst / "include" / f"{prefix}.h").is_file() and len(list(inst.glob(f"lib*/lib{prefix}.a"))) == 1
    assert not (inst / "include" / f"{prefix}_sincos.hpp").exists()  # private: the kernel sources' only

    program = _consumer_source(m)

    # 2. find_package after the install: only the program is compiled
    c1 = tmp_path / "find_package"
    c1.mkdir()
    (c1 / "main.cpp").write_text(program)
    (c1 / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(consumer LANGUAGES CXX)\n"
        f"find_package({prefix} REQUIRED)\nadd_executable(consumer main.cpp)\n"
        f"target_link_libraries(consumer PRIVATE rbdgen::{name})\n")
    _run([cmake, "-S", c1, "-B", c1 / "build", f"-DCMAKE_PREFIX_PATH={inst}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
    _run([cmake, "--build", c1 / "build"])
    _no_python(_compile_commands(c1 / "build"))
    _check_output(_run([c1 / "build" / "consumer"], input=stdin), m, model, states)

    # 3. add_subdirectory of the package folder (outside the consumer's tree), shared, -O1
    c2 = tmp_path / "subdirectory"
    c2.mkdir()
    (c2 / "main.cpp").write_text(program)
    (c2 / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(consumer LANGUAGES CXX)\n"
        f"add_subdirectory({pkg.as_posix()} {prefix})\nadd_executable(consumer main.cpp)\n"
        f"target_link_libraries(consumer PRIVATE rbdgen::{name})\n")
    _run([cmake, "-S", c2, "-B", c2 / "build", f"-D{upper}_OPT=-O1", f"-D{upper}_SHARED=ON",
          "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
    _run([cmake, "--build", c2 / "build"])
    commands = _compile_commands(c2 / "build")
    _no_python(commands)
    assert all("-O1" in c.split() for c in commands if f"{prefix}_" in c)
    assert not (c2 / "build" / prefix / f"{prefix}_example").exists()  # a subproject builds no example
    assert (c2 / "build" / prefix / f"lib{prefix}.so").is_file()
    _check_output(_run([c2 / "build" / "consumer"], input=stdin), m, model, states)

    # 4. pkg-config after the install: one g++ line
    cxx = os.environ.get("CXX") or "g++"
    exe = tmp_path / "pkg_config_consumer"
    (tmp_path / "pc_main.cpp").write_text(program)
    _run([cxx, "-std=c++17", tmp_path / "pc_main.cpp", *_pkg_config_flags(inst, prefix), "-o", exe])
    _check_output(_run([exe], input=stdin), m, model, states)


def test_header_names_survive_hostile_urdf_names(tmp_path, capsys):
    """The header's name arrays hold the URDF's names byte for byte, whatever they contain
    (quotes, backslashes, newlines, comment and trigraph sequences, non-ASCII): they go through
    rbdgen.codegen.escape.c_string. Only the header is compiled (no kernel source)."""
    hostile = {"robot": 'r */ "x\\', "links": ['l"0', "l1\n//", "??/", "*/ l3", "ロボ", "l5\\", "$l6", "l7{"],
               "joints": ["j'0", "j\t1", "??=2", "j/*3", "é4", "j5\r\n#x", "j6\\\\"]}
    text = Path(PACKAGES["iiwa14"][0]).read_text()
    from xml.sax.saxutils import quoteattr

    attr = lambda s: quoteattr(s, {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})  # noqa: E731
    text = re.sub(r'<robot name="[^"]+"', lambda _: f"<robot name={attr(hostile['robot'])}", text, count=1)
    for old, new in zip(re.findall(r'<joint name="([^"]+)"', text), hostile["joints"]):
        text = text.replace(f'<joint name="{old}"', f"<joint name={attr(new)}")
    for old, new in zip(re.findall(r'<link name="([^"]+)"', text), hostile["links"]):
        text = text.replace(f'"{old}"', attr(new))
    urdf = tmp_path / "hostile.urdf"
    urdf.write_text(text, encoding="utf-8")
    model = rbdgen.load_urdf(urdf)
    frames = [f.name for f in model.link_frames if f.name in hostile["links"]][-3:]
    assert len(frames) == 3
    model = model.with_frames(frames)
    rc = main(["generate", str(urdf), "--dtype", "float64", "--kernels", "rnea", "--frames", ",".join(frames),
               "--out", str(tmp_path), "--name", "evil", "--quiet"])
    assert rc == 0, capsys.readouterr().err
    prog = tmp_path / "names.cpp"
    prog.write_text('#include "rbd_evil.h"\n#include <cstdio>\n'
                    'static void hex(const char* w, const char* s) { std::printf("%s ", w);'
                    ' for (; *s; ++s) std::printf("%02x", (unsigned)(unsigned char)*s); std::printf("\\n"); }\n'
                    "int main() { namespace r = rbd_evil; hex(\"robot\", r::robot_name);\n"
                    "  for (int i = 0; i < r::nb; ++i) { hex(\"joint\", r::joint_names[i]); hex(\"body\", r::body_names[i]); }\n"
                    "  for (int i = 0; i < r::nf; ++i) hex(\"frame\", r::frame_names[i]); }\n")
    cxx = os.environ.get("CXX") or "g++"
    _run([cxx, "-std=c++11", "-Wall", "-Wextra", "-Werror", "-I", tmp_path / "evil", prog, "-o", tmp_path / "names"])
    got = {"robot": [], "joint": [], "body": [], "frame": []}
    for line in _run([tmp_path / "names"]).splitlines():
        w = line.split()
        got[w[0]].append(bytes.fromhex(w[1] if len(w) > 1 else "").decode("utf-8"))
    assert got == {"robot": [model.name], "joint": list(model.joint_names), "body": list(model.body_names),
                   "frame": list(model.frames)}


def _cuda_consumer_source(m: dict) -> str:
    """The CUDA package's counterpart of :func:`_consumer_source`: every kernel's outputs on the
    N states from the CPU emulation of both launch shapes, and from the GPU where there is one."""
    p, nq, nv = m["prefix"], m["nq"], m["nv"]
    out = [f'#include "{p}.cuh"', "#include <cstdio>", "#include <vector>", "",
           "static void put(const char* k, const char* mode, const std::vector<double>& x) {",
           '  std::printf("%s %s", k, mode);',
           '  for (double y : x) std::printf(" %.17g", y);',
           '  std::printf("\\n");', "}", "",
           "int main() {", "  long n;", '  if (std::scanf("%ld", &n) != 1) return 2;',
           f"  std::vector<double> q(n * {nq}), v(n * {nv}), a(n * {nv}), tau(n * {nv});",
           "  for (auto* x : {&q, &v, &a, &tau})",
           '    for (auto& y : *x) if (std::scanf("%lf", &y) != 1) return 2;',
           f"  const bool gpu = {p}_device_count() > 0;"]
    for k in m["kernel_order"]:
        ins = ", ".join(f"{i['name']}.data()" for i in m["kernels"][k]["inputs"])
        outs = [(o["name"], int(np.prod(o["shape"]))) for o in m["kernels"][k]["outputs"]]
        out.append("  {")
        for mode in ("thread", "block", "gpu"):
            for o, size in outs:
                out.append(f"    std::vector<double> {o}_{mode}(n * {size});")
        for mode in ("thread", "block"):
            out.append(f"    {p}_{k}_f64_emulate_{mode}(n, {ins}, {', '.join(f'{o}_{mode}.data()' for o, _ in outs)});")
        out.append(f"    if (gpu && {p}_{k}_f64_host(n, {ins}, {', '.join(f'{o}_gpu.data()' for o, _ in outs)}, 0)) return 3;")
        for mode in ("thread", "block", "gpu"):
            for o, _ in outs:
                out.append(f'    if ({"gpu" if mode == "gpu" else "true"}) put("{k}/{o}", "{mode}", {o}_{mode});')
        out.append("  }")
    out += ["  return 0;", "}", ""]
    return "\n".join(out)


def test_cuda_cmake_package_installs_and_matches_reference(tmp_path, capsys):
    """The CUDA package the same way (CMake's CUDA language, nvcc from the CUDA wheels): built
    alone for one architecture, its example run, installed; a C++-only consumer finds it with
    find_package, a one-file program links it through pkg-config; both print the CPU emulation
    of both launch shapes (and the GPU's results where there is one), compared with the reference."""
    pytest.importorskip("nvidia", reason="nvcc comes from the CUDA wheels `make` installs")
    from rbdgen.targets.cuda.nvcc import find_nvcc

    cmake, nvcc = _cmake(), find_nvcc()
    urdf = PACKAGES["iiwa14"][0]
    rc = main(["generate", str(urdf), "--target", "cuda", "--dtype", "float64", "--kernels", "rnea,aba",
               "--out", str(tmp_path), "--name", "iiwa14", "--quiet"])
    assert rc == 0, capsys.readouterr().err
    pkg = tmp_path / "iiwa14"
    m = json.loads((pkg / "manifest.json").read_text())
    lib, upper = m["target"]["library"], m["target"]["library"].upper()
    assert lib == "rbd_iiwa14_cuda"
    model = rbdgen.load_urdf(urdf)
    states = random_state(model, seed=8, n=N_STATES)
    stdin = _states_text(model, states)

    b0, inst = tmp_path / "b0", tmp_path / "prefix"
    _run([cmake, "-S", pkg, "-B", b0, f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-D{upper}_ARCHITECTURES=80-real",
          "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
    _run([cmake, "--build", b0])
    commands = _compile_commands(b0)
    _no_python(commands)
    assert all("-std=c++17" in c and "-O3" in c.split() for c in commands if c.split()[-1].endswith(".cu"))
    assert "largest difference" in _run([b0 / f"{lib}_example"])
    _run([cmake, "--install", b0, "--prefix", inst])

    program = _cuda_consumer_source(m)
    c1 = tmp_path / "find_package"
    c1.mkdir()
    (c1 / "main.cpp").write_text(program)
    (c1 / "CMakeLists.txt").write_text(  # a C++ project: no CUDA language needed to use the library
        "cmake_minimum_required(VERSION 3.16)\nproject(consumer LANGUAGES CXX)\n"
        f"find_package({lib} REQUIRED)\nadd_executable(consumer main.cpp)\n"
        "target_link_libraries(consumer PRIVATE rbdgen::iiwa14_cuda)\n")
    _run([cmake, "-S", c1, "-B", c1 / "build", f"-DCMAKE_PREFIX_PATH={inst}"])
    _run([cmake, "--build", c1 / "build"])
    exe = tmp_path / "pkg_config_consumer"
    (tmp_path / "pc_main.cpp").write_text(program)
    _run([os.environ.get("CXX") or "g++", "-std=c++17", tmp_path / "pc_main.cpp", *_pkg_config_flags(inst, lib),
          "-o", exe])
    for prog in (c1 / "build" / "consumer", exe):
        got = {}
        for line in _run([prog], input=stdin).splitlines():
            w = line.split()
            got[(w[0], w[1])] = np.array([float(x) for x in w[2:]])
        q, v, a, tau = states
        for k in m["kernel_order"]:
            exp = ref_out(model, k, *kernel_args(k, q, v, a, tau, model))
            exp = exp if isinstance(exp, tuple) else (exp,)
            modes = {mode for (name, mode) in got if name.startswith(f"{k}/")}
            assert {"thread", "block"} <= modes
            for mode in modes:
                outs = tuple(got[(f"{k}/{o['name']}", mode)].reshape(N_STATES, *o["shape"])
                             for o in m["kernels"][k]["outputs"])
                assert kernel_err(outs, exp) <= TOL64, (k, mode)
