"""Plain-text tables for the command line (inspect, validate) and the reports."""
from __future__ import annotations


def text_table(rows, left=(0,)) -> list[str]:
    """``rows[0]`` is the header; columns in ``left`` are left-aligned, the rest right-aligned;
    a rule of dashes under the header."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if c in left else cell.rjust(w) for c, (cell, w) in enumerate(zip(r, widths)))
             .rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
