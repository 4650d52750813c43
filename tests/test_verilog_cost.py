"""The Verilog target's LUT estimate (rbdgen.targets.verilog.cost): the operators of a module as
written, each priced as Yosys maps it alone (benchmarks/rtl_operators.py), summed — against the
committed synthesis of whole designs (benchmarks/results/rtl.json) and against Yosys itself."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import rbdgen
import rbdgen.robots
from rbdgen.targets import get_target
from rbdgen.targets.hls.emit import numeric_type
from rbdgen.targets.verilog import cost
from rbdgen.targets.verilog.emit import _Emitter

from conftest import run_main

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def test_operators_of_a_module_as_written():
    text = "\n".join([
        "  wire signed [63:0] t1_ex = a * b;",
        "  wire signed [63:0] t2_ex = a * 32'sd118295;",      # 17 bits
        "  wire signed [63:0] t3_ex = a * -32'sd3;",          # 2 bits
        "  wire signed [32:0] t4_ex = a + b;",
        "  wire signed [32:0] t5_ex = a - t4;",
        "  wire signed [32:0] t6_ex = -t5;",
        "  always @(posedge clk) if (!done) begin mu0_p1 <= mu0_a * mu0_b; mu0_p2 <= mu0_p1; end",
        "    mu0_a = 32'sd0; mu0_b = 32'sd0;",
        "      8'd0: begin mu0_a = x; mu0_b = y; end",
        "      8'd3: begin mu0_a = z; mu0_b = y; end",
        "  rbd_r_sincos u7 (.x(in_q_0), .s(u7_s), .c(u7_c));",
        "  rbd_r_div d1 (.clk(clk), .start(s), .a(a), .b(b), .q(q));",
    ])
    c = cost.count_operators(text, "rbd_r")
    assert c == {"mul": 1, "cmul": [17, 2], "add": 2, "neg": 1, "units": [2], "sincos": 1, "div": 1, "divp": 0}
    lut, _ = cost.module_luts(text, "rbd_r", 32, 16)
    L = cost.OPERATOR_LUTS
    want = L["mul"] + 84.0 + 52.5 + 2 * L["add"] + L["neg"] + L["sincos"] + L["div"] + (L["mul"] + 2 * 32 * 1)
    assert lut == round(want)
    assert cost.module_luts(text, "rbd_r", 24, 12)[0] is None  # calibrated at 32,16 only


def test_prices_are_the_committed_measurement():
    """The prices in the code are what benchmarks/rtl_operators.py measured (its committed run)."""
    ops = json.loads((RESULTS / "rtl_operators.json").read_text())["operators"]
    for name, lut in cost.OPERATOR_LUTS.items():
        assert ops[name]["LUT"] == lut, name
    assert [(int(k[4:]), v["LUT"]) for k, v in ops.items() if k.startswith("cmul")] == list(cost.CONST_MUL_LUTS)
    # between the measured widths, linear; one row of DSPs up to 17 bits
    assert cost.const_mul_luts(15) == pytest.approx((76.25 + 84.0) / 2)
    assert cost.const_mul_luts(17) == 84.0 and cost.const_mul_luts(32) == cost.OPERATOR_LUTS["mul"]


@pytest.mark.parametrize("spec", ["forward_kinematics", "rnea@100"])
def test_estimate_against_the_whole_designs_synthesis(spec):
    """The estimate of the iiwa's FK (unshared) and rnea within 100 DSPs (shared multipliers and
    their operand multiplexers) is within 15 % of Yosys's LUTs for the whole design (the committed
    make synth-report run), where the HLS cost model gave 0.56x and 0.30x."""
    kernel, _, budget = spec.partition("@")
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    src = get_target("verilog").generate(m, (kernel,), dtypes=("float64",), name=None, fixed=(32, 16),
                                         dsp_budget=int(budget) if budget else None)
    lut, c = cost.module_luts(src.files[f"{src.kernels[kernel]['module']}.v"], src.prefix, 32, 16)
    yosys = json.loads((RESULTS / "rtl.json").read_text())["kernels"][spec]["yosys"]["groups"]["LUT"]
    assert 0.85 * yosys <= lut <= 1.15 * yosys, (spec, lut, yosys, c)
    if budget:
        assert c["units"] and c["mul"] == 0
    else:
        assert c["sincos"] == 7 and c["mul"] + len(c["cmul"]) == 77 and not c["units"]


def test_yosys_maps_an_adder_as_priced(tmp_path):
    """One datapath sum as the target writes it (four copies, registers around), synthesized:
    the LUTs the estimate prices it at (yosys synth_xilinx -family xcup, as make synth-report)."""
    yosys = shutil.which("yosys")
    assert yosys, "yosys not found on PATH (`make rtl-tools` installs it)"
    em = _Emitter(numeric_type("float64", (32, 16)), 250.0)
    lines = ["module add4(input wire clk, input wire [255:0] x, output reg [127:0] y);", *em.macros()]
    for i in range(4):
        lines += [f"  reg signed [31:0] a{i}, b{i};",
                  f"  always @(posedge clk) begin a{i} <= x[{64 * i + 31}:{64 * i}]; b{i} <= x[{64 * i + 63}:{64 * i + 32}]; end",
                  *em._arith("add", [f"a{i}", f"b{i}"], f"r{i}"),
                  f"  always @(posedge clk) y[{32 * i + 31}:{32 * i}] <= r{i};"]
    (tmp_path / "add4.v").write_text("\n".join(lines + ["endmodule", ""]))
    r = subprocess.run([yosys, "-q", "-p", "read_verilog add4.v; synth_xilinx -family xcup -top add4; tee -o stat.txt stat"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stderr or r.stdout)[-2000:]
    stat = (tmp_path / "stat.txt").read_text()
    luts = sum(int(n) for n in re.findall(r"^\s+LUT\d\s+(\d+)\s*$", stat, re.M))
    assert luts / 4 == cost.OPERATOR_LUTS["add"], stat


def test_inspect_prints_the_estimate_at_the_calibrated_format_only(capsys):
    urdf = rbdgen.robots.path("iiwa14")
    rc, out, err = run_main(capsys, "inspect", urdf, "--cost", "--target", "verilog", "--fixed", "32,16",
                            "--kernels", "forward_kinematics", "-q")
    assert rc == 0, err
    assert "LUTs of the modules as written" in out
    row = [ln.split() for ln in out.splitlines() if ln.startswith("forward_kinematics")][-1]
    assert row[1:4] == ["65", "12", "41"]  # var×var, ×const, add/sub
    rc, out, err = run_main(capsys, "inspect", urdf, "--cost", "--target", "verilog", "--fixed", "24,12",
                            "--kernels", "forward_kinematics", "-q")
    assert rc == 0, err
    assert "LUTs of the modules as written" not in out
