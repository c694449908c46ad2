#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws the per-write cost of a fenced write against the number of keys
already stored, for the memory, file, SQLite and PostgreSQL stores, from
Google Benchmark JSON (sqlite_bench and postgres_bench with
--benchmark_out_format=json), as an SVG with log-log axes. No plotting
library needed (Python 3's standard library only).

  build/default/bench/sqlite_bench --benchmark_out=sqlite.json --benchmark_out_format=json
  build/default/bench/postgres_bench --benchmark_filter=Keys --benchmark_out=pg.json --benchmark_out_format=json
  python3 bench/plot_fence_keys.py sqlite.json pg.json > docs/fence_write_vs_keys.svg
"""
import json
import math
import sys

SERIES = [  # benchmark family, label, colour
    ("BM_Memory_FenceWrite", "memory", "#2ca02c"),
    ("BM_File_FenceWrite", "file (fsync off)", "#d62728"),
    ("BM_Sqlite_FenceWrite", "SQLite (synchronous=OFF)", "#1f77b4"),
    ("BM_Pg_FenceWriteKeys", "PostgreSQL (loopback, fsync off)", "#9467bd"),
]


def load(paths):
    points = {name: [] for name, _, _ in SERIES}
    for path in paths:
        with open(path) as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                    continue
                family, _, rest = b["name"].partition("/")
                if family in points:
                    keys = int(rest.split("/")[0])
                    ns = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
                    points[family].append((keys, ns))
    return {k: sorted(v) for k, v in points.items() if v}


def svg(points):
    w, h, left, right, top, bottom = 720, 440, 80, 230, 30, 60
    xs = [k for v in points.values() for k, _ in v]
    ys = [ns for v in points.values() for _, ns in v]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    px = lambda k: left + (math.log10(k) - x0) / max(x1 - x0, 1) * (w - left - right)
    py = lambda ns: h - bottom - (math.log10(ns) - y0) / max(y1 - y0, 1) * (h - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Fenced write: cost per write against keys already stored</text>']
    for e in range(x0, x1 + 1):
        x = px(10 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{h - bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">1e{e}</text>')
    units = {0: "1 ns", 1: "10 ns", 2: "100 ns", 3: "1 us", 4: "10 us", 5: "100 us", 6: "1 ms", 7: "10 ms", 8: "100 ms", 9: "1 s"}
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{units.get(e, f"1e{e} ns")}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 15}" text-anchor="middle">keys stored (log)</text>')
    out.append(f'<text x="18" y="{(top + h - bottom) / 2}" transform="rotate(-90 18 {(top + h - bottom) / 2})" '
               'text-anchor="middle">time per write (log)</text>')
    for i, (name, label, colour) in enumerate(SERIES):
        if name not in points:
            continue
        pts = " ".join(f"{px(k):.1f},{py(ns):.1f}" for k, ns in points[name])
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for k, ns in points[name]:
            out.append(f'<circle cx="{px(k):.1f}" cy="{py(ns):.1f}" r="3.5" fill="{colour}"/>')
        ly = top + 20 + i * 20
        out.append(f'<line x1="{w - right + 15}" y1="{ly - 4}" x2="{w - right + 35}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{w - right + 40}" y="{ly}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.stdout.write(svg(load(sys.argv[1:])))
