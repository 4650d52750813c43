"""`make gpu-check`'s planner, tested without a GPU (issue 47, item 2: build here, run there).

On a tiny plan (one robot case, one kernel): the dry mode reports the library missing and fails;
prepare compiles and packs it; the dry mode then finds it and passes. Then the GPU machine's side:
the packed cache unpacked elsewhere, nvcc replaced by the stub the run uses (which prints the
building nvcc's version and compiles nothing), and ``rbdgen.build`` as the GPU tests call it finds
the library — and a build the plan does not hold fails at once, naming the remedy. The full
prepare (every robot case, minutes to hours on 2 cores) is ``make gpu-check-prepare``, not a test.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import rbdgen
from rbdgen.errors import BuildError
from rbdgen.targets.cuda.nvcc import GPUS_ENV, detect_archs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402

CASE, KERNEL = "double_pendulum-fixed", "gravity"


def _args(tmp_path):
    return ["--cases", CASE, "--kernels", KERNEL, "--parts", "tests", "--prep", str(tmp_path / "prep"),
            "--carry", str(tmp_path / "carry")]


def test_the_plan_holds_every_robot_case_and_the_gpu_tests_builds():
    from conftest import ROBOT_CASES

    builds = gpu_check.plan()
    cases = {b.model for b in builds if b.what.startswith("tests/test_cuda.py: every kernel")}
    assert cases == {p.id for p in ROBOT_CASES}
    rolled = {b.model for b in builds if b.kwargs.get("unroll") is False}
    assert rolled == cases
    # as the tests build (no arch: the GPUs found there), or with the architecture they name
    # (compute_90: PTX of it, which the driver compiles on that GPU)
    assert all(b.kwargs.get("arch") in (None, gpu_check.ARCH, f"compute_{gpu_check.ARCH}") for b in builds)
    whats = " ".join(b.what for b in builds)
    for part in ("_gpu_kern", "debug-mode child", "test_torch.py", "run_cuda.py", "seed 000", "seed 001",
                 "test_fd_derivatives_minv.py"):
        assert part in whats, part


def test_dry_mode_finds_the_prebuilt_libraries(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpu_check, "build_launch_bench", lambda folder: folder / "cuda_launch-none")
    assert gpu_check.main(["dry", *_args(tmp_path)]) == 1
    out = capsys.readouterr().out
    # the case's library unrolled and rolled (test_gpu_every_kernel_matches_reference runs both)
    assert "MISSING" in out and "0 of 2 libraries prebuilt; 2 missing" in out
    assert "pytest -m gpu tests/test_cuda.py" in out  # the run it would make

    assert gpu_check.main(["prepare", *_args(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 libraries prebuilt" in out and "MISSING" not in out
    part = tmp_path / "carry" / "part1"  # one part: a small plan fits one device call
    manifest = json.loads((part / "manifest.json").read_text())
    assert manifest["cases"] == [CASE] and manifest["steps"] == list(gpu_check.STEP_LIMITS)
    assert "carry/part1: " in out and CASE in out
    # a case in a part of its own (here: any limit is too small) takes both its builds, unrolled
    # and rolled, with it: the GPU machine's stub compiles nothing, so a build left in part 1
    # fails the case's test there (it did, 2026-11-28, for every case of part 2)
    prep = json.loads((tmp_path / "prep" / "manifest.json").read_text())
    sizes = gpu_check.pack(prep, tmp_path / "prep" / "kernels", tmp_path / "split", gpu_check._nvcc_version()[1], limit=1)
    assert [p["cases"] for p in sizes["parts"]] == [[], [CASE]]
    part2 = json.loads((tmp_path / "split" / "part2" / "manifest.json").read_text())
    case_builds = {e["key"] for e in prep["builds"] if e["model"] == CASE}
    assert len(case_builds) == 2 and case_builds <= {e["key"] for e in part2["builds"]}

    # the GPU machine's side: the packed libraries elsewhere, nvcc the stub
    there = tmp_path / "there"
    for tb in part.glob("*.tar.xz"):
        with tarfile.open(tb) as tar:
            tar.extractall(there)
    assert (there / "erd").is_dir()  # the example-robot-data URDFs the tests name
    assert (there / "kernels" / manifest["builds"][0]["key"]).is_dir()
    stub = part / "bin" / "nvcc"
    nvcc, version = gpu_check._nvcc_version()
    assert subprocess.run([stub, "--version"], capture_output=True, text=True).stdout.strip() == version
    r = subprocess.run([stub, "-c", "x.cu"], capture_output=True, text=True)
    assert r.returncode == 1 and "was not prebuilt" in r.stderr
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(there / "kernels"))
    monkeypatch.setenv("NVCC", str(stub))
    monkeypatch.setenv(GPUS_ENV, gpu_check.ARCH)  # what nvidia-smi says there
    gpu_check._reset_compiler_state()
    detect_archs.cache_clear()
    try:
        model = gpu_check.load_model(CASE)
        # as test_gpu_every_kernel_matches_reference builds (GPU_BUILD: no arch, the GPUs found)
        kwargs = gpu_check.plan([CASE], (KERNEL,), ("tests",))[0].kwargs
        assert "arch" not in kwargs
        kern = rbdgen.build(model, **kwargs)
        assert Path(kern.path).is_relative_to(there / "kernels")
        # machine code for the GPU found, no PTX (half of a compressed library)
        flags = (Path(kern.path).parent / "command.txt").read_text().split()
        assert f"arch=compute_{gpu_check.ARCH},code=sm_{gpu_check.ARCH}" in flags and not any(
            "code=compute_" in f for f in flags)
        with pytest.raises(BuildError, match="was not prebuilt.*make gpu-check-prepare"):
            rbdgen.build(model, target="cuda", kernels=("rnea",), opt="-O3")
    finally:
        monkeypatch.undo()
        gpu_check._reset_compiler_state()
        detect_archs.cache_clear()
