"""rbdgen benchmarks, the plot: results.png, per robot the per-state times of every kernel (rbdgen
one state, Pinocchio's faster build, rbdgen's largest batch on one thread; log scale). Only when
matplotlib is importable (not a dependency).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import measure
from report import best_pin, med


def plot(results: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    robots = list(results["robots"])
    fig, axes = plt.subplots(1, len(robots), figsize=(6 * len(robots), 4.5), squeeze=False)
    for ax, name in zip(axes[0], robots):
        r = results["robots"][name]
        v = r["variants"].get("default")
        # the kernels this run timed (--kernels may have chosen a few), in the registry's order
        kernels = [k for k in measure.KERNELS if k in v["batch_ns_per_state"]["1"]] if v else list(measure.KERNELS)
        x = np.arange(len(kernels))
        series = [("rbdgen C++ 1 state", [med(r, "variants", "default", "cpp_single_ns", k) for k in kernels]),
                  ("Pinocchio C++ (faster build)", [med(r, best_pin(r, k), "ns_per_call", k) for k in kernels])]
        if v and kernels:
            big = str(max(int(n) for n in v["batch_ns_per_state"]["1"][kernels[0]]))
            series.append((f"rbdgen batch N={big}, 1 thread",
                           [med(v, "batch_ns_per_state", "1", k, big) for k in kernels]))
        w = 0.8 / len(series)
        for i, (label, ys) in enumerate(series):
            ax.bar(x + i * w, [y or 0 for y in ys], w, label=label)
        ax.set_yscale("log")
        ax.set_xticks(x + 0.4 - w / 2)
        ax.set_xticklabels(kernels, rotation=45, ha="right")
        ax.set_ylabel("ns per state")
        ax.set_title(f"{name} (nv = {r['nv']})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True
