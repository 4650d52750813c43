# rbdgen — every tool the build and the tests need is installed from here.
# `make demo` and `make test` work on a fresh machine with nothing installed by hand.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=
# both cores: compile-heavy tests run in parallel workers
PYTEST_WORKERS ?= 2
# only its ap_types headers are used (see the venv rule)
HLS4ML_VERSION := 1.3.0

.PHONY: mjcf-corpus rtl-tools demo test test-quick test-gpu test-torch sanitize-gpu gpu-check gpu-check-prepare bench bench-cuda bench-dask bench-hls bench-hls-budget bench-scan bench-layouts bench-call-costs synth-report bench-rolled bench-rolled-cuda bench-lathrop bench-seed000 bench-seed001 bench-control clean venv generated

venv: $(STAMP)

# the Makefile is a prerequisite: a change to what it installs reinstalls
$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,cuda]'
	# Xilinx's Apache-2.0 ap_types headers (ap_fixed.h) for the HLS C simulation: the hls4ml wheel
	# ships them; its own dependencies (tensorflow, ...) are not needed. rbdgen finds the folder
	# in site-packages at run time (rbdgen.targets.hls.csim.ap_types_dir; RBDGEN_AP_TYPES overrides it).
	$(PY) -m pip install --quiet --no-deps hls4ml==$(HLS4ML_VERSION)
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rbdgen demo

# The MJCF test corpus (issue 43): dm_control's suite and locomotion walkers (cheetah … fruitfly),
# only their XML and mesh files, unpacked from the pinned dm_control wheel into .cache/mjcf/
# (git-ignored; ~50 MB, the wheel 56 MB). dm_control is not installed: it pulls MuJoCo's binaries
# and much else. tests/test_mjcf.py reads the files; without them its corpus tests skip, saying to
# run this, except under `make test`, which sets RBDGEN_REQUIRE_MJCF=1 (then they fail).
DM_CONTROL_VERSION := 1.0.50
MJCF_DIR := .cache/mjcf
MJCF_CORPUS := $(MJCF_DIR)/dm_control-$(DM_CONTROL_VERSION)/.complete
mjcf-corpus: $(MJCF_CORPUS)
$(MJCF_CORPUS): | $(STAMP)
	$(PY) -m pip download --quiet --no-deps --only-binary :all: dm_control==$(DM_CONTROL_VERSION) -d $(MJCF_DIR)/wheels
	$(PY) tests/mjcf_corpus.py unpack $(MJCF_DIR)/wheels/dm_control-$(DM_CONTROL_VERSION)-py3-none-any.whl $(MJCF_DIR)/dm_control-$(DM_CONTROL_VERSION)

# --durations: the 25 slowest tests at the end of every run, so that CI's time budget (25 min on
# the 2-core VM) shows where it goes; --dist loadgroup: a module marked xdist_group runs on one
# worker (its module-scoped builds once), the rest as --dist load
test: $(STAMP) $(MJCF_CORPUS) rtl-tools
	RBDGEN_REQUIRE_MJCF=1 $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

# The Verilog target's tools (issue 48): Verilator simulates the generated modules, Yosys elaborates
# and synthesizes them, Icarus Verilog (a second, independent simulator) runs the generated
# testbenches. Debian packages (bookworm: verilator 5.006, yosys 0.23, iverilog 11), installed with
# apt-get when missing (~15 s; root, as on CI; elsewhere run it with sudo). tests/test_verilog.py
# fails, naming this target, without them.
rtl-tools:
	@command -v verilator >/dev/null && command -v yosys >/dev/null && command -v iverilog >/dev/null || \
	  { echo "installing verilator, yosys and iverilog (apt-get)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends verilator yosys iverilog >/dev/null || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends verilator yosys iverilog >/dev/null; }; }

# the developer loop: ≤ 3 minutes here with an empty compile cache (tests/conftest.py chooses the
# tests: every kernel family on the iiwa and the floating quadruped, CUDA emulation and HLS C
# simulation of one small build each, the generated packages, the fast unit tests). CI runs `test`.
test-quick: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m quick $(PYTEST_ARGS)

# optional, not part of `make test`/CI: rbdgen.torch and the PyTorch cases of the DLPack tests.
# PyTorch's default Linux wheel (PyPI; the CPU-only index is not reachable here) brings its CUDA
# library wheels: 2.6 GB to download, 5.5 GB installed, 62 s on this machine's fast mirror, more
# than CI's time budget affords (docs/torch.md). It also pins nvidia-cuda-runtime to torch's
# CUDA version in this venv; CUDA builds were checked to compile and pass with it.
# RBDGEN_REQUIRE_TORCH=1: where torch cannot be imported those tests fail instead of skipping.
test-torch: $(STAMP)
	$(PY) -m pip install --quiet torch
	RBDGEN_REQUIRE_TORCH=1 $(PY) -m pytest -n $(PYTEST_WORKERS) tests/test_torch.py tests/test_dlpack.py $(PYTEST_ARGS)

# on a machine with an NVIDIA GPU: installs cupy (the gpu extra, with the CUDA libraries it
# loads) and runs the gpu-marked tests. RBDGEN_REQUIRE_GPU=1: where the CUDA runtime finds no
# usable GPU they fail, saying why, rather than skip (a green run means they ran). `make test`
# runs them too; there they skip where no GPU exists, and fail where nvidia-smi lists one that
# cannot be used or cupy is missing.
test-gpu: $(STAMP)
	$(PY) -m pip install --quiet -e '.[gpu]'
	RBDGEN_REQUIRE_GPU=1 $(PY) -m pytest -n $(PYTEST_WORKERS) -m gpu $(PYTEST_ARGS)

# on a machine with an NVIDIA GPU: compute-sanitizer (NVIDIA's wheel, installed here) runs the GPU
# tests of SANITIZE_TESTS (default: the iiwa, every kernel and shape; the tools slow kernels
# 10-100x) under memcheck, racecheck and synccheck; any report fails the run
SANITIZE_TESTS ?= -m gpu -k iiwa14
SANITIZER = $$($(PY) -c "import nvidia, pathlib; print(next(p for r in nvidia.__path__ for p in [pathlib.Path(r) / 'cu13' / 'bin' / 'compute-sanitizer'] if p.exists()))")
sanitize-gpu: $(STAMP)
	$(PY) -m pip install --quiet -e '.[gpu]' nvidia-cuda-sanitizer-api
	for tool in memcheck racecheck synccheck; do \
	  echo "== compute-sanitizer --tool $$tool"; \
	  RBDGEN_REQUIRE_GPU=1 $(SANITIZER) --tool $$tool --error-exitcode 1 $(PY) -m pytest -p no:xdist -q $(SANITIZE_TESTS) || exit 1; \
	done

# issue 47, build here, run there: a GPU is lent for minutes, on a machine with no network and its
# own Python. gpu-check-prepare compiles HERE (no GPU needed) every CUDA library the GPU run needs
# (every robot case's GPU tests, the benchmarks, the seeds' experiments; sm_90) into .cache/gpu-check/
# and packs what travels into .cache/gpu-check-carry/ (libraries xz-packed, the test URDFs, an nvcc
# stub, the C++ launch benchmark), then checks it as DRY=1 does. On the GPU machine, gpu-check runs
# the steps (tests on every robot case, sanitizers, torch/JAX/cupy paths, benchmarks, seeds; ≤ 8 min)
# with that machine's python3, writing benchmarks/results/ after each step (GPU_CHECK_ARGS="--out DIR":
# packed there too). DRY=1: here, plan the run, check every library it needs is prebuilt and packed
# (fails if not), and print it. docs/cuda.md "GPU check" has the device tool's call.
GPU_CHECK_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_CHECK_ARGS ?=
gpu-check-prepare: $(STAMP)
	$(PY) benchmarks/gpu_check.py prepare
gpu-check: $(if $(filter 1,$(DRY)),$(STAMP))
ifeq ($(DRY),1)
	$(PY) benchmarks/gpu_check.py dry
else
	$(GPU_CHECK_PY) benchmarks/gpu_check.py run $(GPU_CHECK_ARGS)
endif

# the generated packages kept in the repository (tests/test_generated.py checks they are current).
# float64 only; the unrolled derivative kernels (~0.7-1 MB each) only in iiwa14's CPU and HLS
# packages, aba_scan only in iiwa14's HLS package, rnea_scan in iiwa14's CPU and HLS packages (the
# quadruped keeps rnea_scan: the scan on a tree), the stale-data kernels in iiwa14's CPU package
# and rnea_stale in its HLS package (yamakita is the same step with one input changed, the two
# Luh–Walker–Paul ones the same passes over 3-vectors): generated/
# stays small enough to review (< 4 MiB) and every kernel is there on some target (iiwa14 CPU:
# the flange's frame kernels and osim_inverse; contact_terms is left out for size, tests build it).
GEN_SKIP := --skip-kernels rnea_derivatives,aba_derivatives
GEN_STALE := rnea_stale,rnea_stale_yamakita,rnea_stale_hamilton,rnea_stale_binder_herzog_lwp
generated: $(STAMP)
	$(VENV)/bin/rbdgen generate robots/iiwa14.urdf --dtype float64 --frames iiwa_link_ee --skip-kernels contact_terms,aba_scan --out generated --name iiwa14 --quiet
	$(VENV)/bin/rbdgen generate robots/quadruped.urdf --floating-base --dtype float64 $(GEN_SKIP),aba_scan,$(GEN_STALE) --out generated --name quadruped --quiet
	$(VENV)/bin/rbdgen generate robots/iiwa14.urdf --target cuda --dtype float64 $(GEN_SKIP),rnea_scan,aba_scan,$(GEN_STALE) --out generated --name iiwa14_cuda --quiet
	$(VENV)/bin/rbdgen generate robots/iiwa14.urdf --target hls --fixed 32,16 --skip-kernels rnea_stale_yamakita,rnea_stale_hamilton,rnea_stale_binder_herzog_lwp --out generated --name iiwa14_hls --quiet
	$(VENV)/bin/rbdgen generate robots/iiwa14.urdf --target verilog --fixed 32,16 --kernels forward_kinematics --out generated --name iiwa14_verilog --quiet

# benchmarks (not a test): rbdgen vs the NumPy reference vs Pinocchio (C++) vs Pinocchio + CppADCodeGen,
# ~13 min (+ one-off builds of the peers, cached under benchmarks/.build/); writes benchmarks/results/.
# BENCH_ARGS="--robots iiwa14 --quick" for a smoke run (see benchmarks/README.md). The codegen peer's
# wheels at the versions issue 49 measured (benchmarks/codegen_peer.py, CG_WHEELS, checks the same pins)
BENCH_ARGS ?=
BENCH_CG_WHEELS := cmeel-cppad==20250000.2 cmeel-cppadcodegen==2.4.3
bench: $(STAMP)
	$(PY) -m pip install --quiet $(BENCH_CG_WHEELS)
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# on a machine with an NVIDIA GPU: CUDA kernels vs batch size next to the CPU kernels (installs
# cupy); writes benchmarks/results/cuda.{json,md}. Without a GPU it says so and writes nothing.
bench-cuda: $(STAMP)
	$(PY) -m pip install --quiet -e '.[gpu]'
	$(PY) benchmarks/run_cuda.py $(BENCH_ARGS)
# HLS fixed-point accuracy sweep (not a test): error of every kernel vs the reference across
# ap_fixed formats, iiwa14 and the quadruped; writes benchmarks/results/hls_accuracy.{json,md,png}.
# matplotlib (for the plot) is installed here only: nothing else needs it.
HLS_BENCH_ARGS ?=
bench-hls: $(STAMP)
	$(PY) -m pip install --quiet matplotlib
	$(PY) benchmarks/hls_accuracy.py $(HLS_BENCH_ARGS)

# FPGA latency vs DSP budget (not a test): the list-scheduled designs of rnea, aba and ∇FD for the
# iiwa, the quadruped and TALOS within 16 … 12288 DSPs, beside our CPU kernels timed in the same
# run; writes benchmarks/results/hls_budget.{json,md,png} (~5 min). HLS_BENCH_ARGS=--quick: iiwa only.
bench-hls-budget: $(STAMP)
	$(PY) -m pip install --quiet matplotlib
	$(PY) benchmarks/hls_budget.py $(HLS_BENCH_ARGS)

# log-depth dynamics report (not a test): op counts vs Lathrop, depth vs chain length 4..1024,
# measured time of rnea/aba vs rnea_scan/aba_scan; writes benchmarks/results/scan.{json,md,png}
# (~10 min). matplotlib for the plot, as bench-hls. SCAN_ARGS=--quick for a smoke run.
SCAN_ARGS ?=
bench-scan: $(STAMP)
	$(PY) -m pip install --quiet matplotlib
	$(PY) benchmarks/scan.py $(SCAN_ARGS)

# rolled against unrolled kernels (issue 44): build time and time per call against robot size (chains
# of 10 … 100 000 links; at 100 000 rnea alone, ~10 min and 13 GB), and unroll="auto" on the bench
# robots; ~45 min on 2 cores. Not a test.
# Writes benchmarks/results/rolled.{json,md}; ROLLED_ARGS=--quick for a smoke run.
bench-rolled: $(STAMP)
	$(PY) benchmarks/rolled.py $(ROLLED_ARGS)

# the CUDA target rolled against unrolled (issue 44; no GPU needed, not a test): build time, source
# size and ptxas's report per kernel for the three bench robots (~20 min on 2 cores)
bench-rolled-cuda: $(STAMP)
	$(PY) benchmarks/rolled_cuda.py

# batch layouts and streaming stores (issue 49, item 3; not a test): rows, rows streamed, states last,
# per state on one core for three robots at N = 256 … 16 384; ~5 min; writes
# benchmarks/results/layouts.{json,md}. LAYOUTS_ARGS=--quick for a smoke run
LAYOUTS_ARGS ?=
bench-layouts: $(STAMP)
	$(PY) benchmarks/layouts.py $(LAYOUTS_ARGS)

# what a call from Python costs beside its kernel (issues 47, 49; not a test): small batches, the
# states-last layout through the binding and through the Python method, f_ext= against the variant
# by name; iiwa and TALOS, ~3 min; writes benchmarks/results/call_costs.{json,md}
bench-call-costs: $(STAMP)
	$(PY) benchmarks/call_costs.py

# the Verilog target synthesized by Yosys (issue 48; not a test): each datapath operator alone (~2 min:
# the prices of rbdgen/targets/verilog/cost.py, benchmarks/results/rtl_operators.{json,md}), then
# synth_xilinx -family xcup per kernel of the iiwa (FK, rnea, crba, aba), cell counts beside the HLS cost
# model's estimate; ~30 min on 2 cores; writes benchmarks/results/rtl.{json,md}. SYNTH_ARGS="--kernels forward_kinematics" for one kernel
SYNTH_ARGS ?=
synth-report: $(STAMP) rtl-tools
	$(PY) benchmarks/rtl_operators.py
	$(PY) benchmarks/rtl_synth.py $(SYNTH_ARGS)

# Lathrop's Tables 1 and 4 (seed 003, transcribed with line numbers) beside our op counts and
# critical paths (not a test): traced IR only, ~5 s; writes benchmarks/results/lathrop.{json,md}
bench-lathrop: $(STAMP)
	$(PY) benchmarks/lathrop.py

# seed 001's experiment (Plancher et al., ∇FD of the iiwa on CPU, GPU, FPGA) with our kernels (not a
# test): CPU measured, FPGA from the HLS cost model, the GPU left to seeds_gpu.py; ~1 min; writes
# benchmarks/results/seed001.{json,md,png}. matplotlib for the plot, as bench-scan
bench-seed001: $(STAMP)
	$(PY) -m pip install --quiet matplotlib
	$(PY) benchmarks/seed001.py

# seed 000's experiments (Yang, Wu & Pan, Figs. 1-3: one ID/FD call against the number of links,
# many independent calls) with our kernels on the CPU (not a test); ~15 min; writes
# benchmarks/results/seed000.{json,md,png}. SEED000_ARGS=--quick for a smoke run
SEED000_ARGS ?=
bench-seed000: $(STAMP)
	$(PY) -m pip install --quiet matplotlib
	$(PY) benchmarks/seed000.py $(SEED000_ARGS)

# stale-data inverse dynamics in closed loop (not a test): tracking error vs control period and
# where each scheme goes unstable, planar 3-link arm and iiwa; writes
# benchmarks/results/control.{json,md,png} (5 min on the 2-core VM, shared; the controllers are the generated kernels, --id reference: the NumPy reference, ~30× longer). matplotlib for the plot, as
# bench-scan. CONTROL_ARGS=--quick for a smoke run.
CONTROL_ARGS ?=
bench-control: $(STAMP)
	$(PY) -m pip install --quiet matplotlib
	$(PY) benchmarks/control.py $(CONTROL_ARGS)

# ∇FD on a 2-worker dask LocalCluster against one local call (not a test): throughput per worker,
# compute only and with the results gathered; writes benchmarks/results/dask.{json,md} (~4 min: two clusters)
DASK_ARGS ?=
bench-dask: $(STAMP)
	$(PY) benchmarks/dask_throughput.py $(DASK_ARGS)

# the dm_control humanoid and dog from their MJCF files (issue 43; not a test): load, cold build of
# the dynamics kernels and one-state ns per call against Pinocchio's C++ on the same tree; writes
# benchmarks/results/mjcf.{json,md} (~6 min here; the native Pinocchio harness as `make bench`'s).
# MJCF_BENCH_ARGS=--quick for a smoke run
.PHONY: bench-mjcf
MJCF_BENCH_ARGS ?=
bench-mjcf: $(STAMP) $(MJCF_CORPUS)
	$(PY) benchmarks/mjcf.py $(MJCF_BENCH_ARGS)

# every URDF of example-robot-data (not only the test suite's 16) against Pinocchio, fixed and
# floating base: the NumPy reference and the traced kernels (IR interpreter), every kernel with a
# Pinocchio counterpart; writes benchmarks/results/robots.{json,md} (not a test: minutes).
# ROBOTS_ARGS="--only talos,ur5" for a few; --compile rnea,crba,… also builds and validates those
# kernels (the committed run: rnea, crba, aba, 12 min here)
.PHONY: bench-robots
ROBOTS_ARGS ?=
bench-robots: $(STAMP)
	$(PY) benchmarks/robots.py $(ROBOTS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
