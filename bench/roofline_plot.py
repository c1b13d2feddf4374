#!/usr/bin/env python3
"""Roofline plot of `qcc --report=json` (and optionally `qrun --profile-json`).

Usage:
  bench/roofline_plot.py REPORT.json [--profile PROFILE.json] [--function decode]
                         [-o roofline.svg]

One panel per target of the report (H100, H200, this CPU): log-log axes of
arithmetic intensity (FLOP/byte) against FLOP/s, the roofs min(peak compute,
intensity x bandwidth) for f16/bf16 tensor, int8 tensor and plain f32 math,
and every kernel region of the chosen entry points as a point at its
predicted performance (on its roof by construction: the report's time is the
roofline floor). With --profile, the CPU panel also shows what qrun measured
per op kind (hollow squares, below the roof: the gap is the lost MFU / MBU).
Kernels without FLOPs (embedding gathers) have no place on a log FLOP/s axis
and are counted in the panel title. docs/ROOFLINE.md explains the counts.

Writes SVG with the standard library only (no plotting package needed).
"""
import argparse
import json
import math
import os
import sys

KIND_COLORS = {
    "gemm_f16": "#1f77b4", "gemm_i8": "#d62728", "attention": "#2ca02c",
    "norm": "#9467bd", "norm_quantize": "#8c564b", "quantize": "#e377c2",
    "elementwise": "#7f7f7f", "embedding": "#bcbd22", "host": "#17becf",
}
ROOF_STYLE = {"f16": ("#1f77b4", "f16/bf16 tensor"), "i8": ("#d62728", "int8 tensor"),
              "f32": ("#555555", "f32")}
MARKERS = {"main": "circle", "prefill": "circle", "prefill_last": "circle",
           "decode": "triangle"}
# qrun --profile on the op plan reports ops: coloured as the kernel kind
# that holds them on the GPU.
OP_KINDS = {"linear": "gemm_f16", "qlinear": "gemm_i8", "attention": "attention",
            "kv_attention": "attention", "rotary": "attention", "layer_norm": "norm",
            "rms_norm": "norm", "quantize": "quantize", "embedding": "embedding"}
PANEL_W, PANEL_H = 520, 430
MARGIN = dict(left=78, right=16, top=58, bottom=58)
LEGEND_H = 80


def si(v, unit=""):
    """1.5e12 -> '1.5T' (SI prefixes)."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= factor:
            v /= factor
            break
    else:
        prefix = ""
    text = f"{v:.3g}"
    return f"{text}{prefix}{unit}"


def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Panel:
    """Log-log axes inside a rectangle of the SVG."""

    def __init__(self, x0, y0, xlim, ylim):
        self.x0, self.y0 = x0, y0
        self.w = PANEL_W - MARGIN["left"] - MARGIN["right"]
        self.h = PANEL_H - MARGIN["top"] - MARGIN["bottom"]
        self.lx = [math.log10(v) for v in xlim]
        self.ly = [math.log10(v) for v in ylim]

    def px(self, x):
        t = (math.log10(x) - self.lx[0]) / (self.lx[1] - self.lx[0])
        return self.x0 + MARGIN["left"] + t * self.w

    def py(self, y):
        t = (math.log10(y) - self.ly[0]) / (self.ly[1] - self.ly[0])
        return self.y0 + MARGIN["top"] + (1 - t) * self.h

    def inside(self, x, y):
        return (self.lx[0] <= math.log10(x) <= self.lx[1]
                and self.ly[0] <= math.log10(y) <= self.ly[1])


def marker(shape, x, y, color, hollow=False, size=5):
    fill = "none" if hollow else color
    style = f'fill="{fill}" stroke="{color}" stroke-width="1.4" fill-opacity="0.75"'
    if shape == "triangle":
        pts = f"{x:.1f},{y - size:.1f} {x - size:.1f},{y + size * 0.8:.1f} {x + size:.1f},{y + size * 0.8:.1f}"
        return f'<polygon points="{pts}" {style}/>'
    if shape == "diamond":
        pts = f"{x:.1f},{y - size:.1f} {x - size:.1f},{y:.1f} {x:.1f},{y + size:.1f} {x + size:.1f},{y:.1f}"
        return f'<polygon points="{pts}" {style}/>'
    if shape == "square":
        return f'<rect x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size}" height="{2 * size}" {style}/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size}" {style}/>'


def draw_panel(out, panel, target, points, measured, title):
    p = panel
    left, top = p.x0 + MARGIN["left"], p.y0 + MARGIN["top"]
    out.append(f'<rect x="{left}" y="{top}" width="{p.w}" height="{p.h}" fill="white" stroke="#333"/>')
    # Decade grid and tick labels.
    for k in range(math.ceil(p.lx[0]), math.floor(p.lx[1]) + 1):
        x = p.px(10 ** k)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + p.h}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top + p.h + 16}" text-anchor="middle" font-size="12">{esc(si(10 ** k))}</text>')
    for k in range(math.ceil(p.ly[0]), math.floor(p.ly[1]) + 1):
        y = p.py(10 ** k)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + p.w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="12">{esc(si(10 ** k))}</text>')
    out.append(f'<text x="{left + p.w / 2}" y="{top + p.h + 38}" text-anchor="middle" font-size="13">'
               'arithmetic intensity (FLOP / byte)</text>')
    out.append(f'<text x="{p.x0 + 18}" y="{top + p.h / 2}" text-anchor="middle" font-size="13" '
               f'transform="rotate(-90 {p.x0 + 18} {top + p.h / 2})">FLOP/s</text>')
    out.append(f'<text x="{left + p.w / 2}" y="{p.y0 + 22}" text-anchor="middle" font-size="15" '
               f'font-weight="bold">{esc(title)}</text>')
    out.append(f'<text x="{left + p.w / 2}" y="{p.y0 + 40}" text-anchor="middle" font-size="12" fill="#444">'
               f'{esc(si(target["bandwidth"], "B/s"))} memory; {esc(target.get("source", ""))}</text>')
    # Roofs: min(peak, I * bandwidth), one per precision, sampled on a log grid.
    bw = target["bandwidth"]
    cpu = target["name"] == "CPU"
    top = max(target[prec] for prec in ROOF_STYLE)
    for prec, (color, name) in ROOF_STYLE.items():
        peak = target[prec]
        if cpu and prec == "f16":
            continue  # the CPU computes f16 in f32: one roof
        if cpu:
            name = name.replace(" tensor", "")
        steps = 200
        pts = []
        for i in range(steps + 1):
            lx = p.lx[0] + (p.lx[1] - p.lx[0]) * i / steps
            y = min(peak, 10 ** lx * bw)
            if p.ly[0] <= math.log10(y) <= p.ly[1]:
                pts.append(f"{p.px(10 ** lx):.1f},{p.py(y):.1f}")
        if pts:
            out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color}" stroke-width="2"/>')
        ridge = peak / bw
        if p.inside(ridge, peak):
            # Right-aligned on the flat part: the highest roof's label above
            # it, the others below theirs (the roofs lie close together).
            y = p.py(peak) + (-5 if peak == top else 13)
            out.append(f'<text x="{left + p.w - 4}" y="{y:.1f}" text-anchor="end" '
                       f'font-size="11" fill="{color}">{esc(name)} {esc(si(peak, "FLOP/s"))}, '
                       f'ridge {ridge:.3g} FLOP/B</text>')
    for fn, kernel in points:
        x, y = kernel["intensity"], kernel["flops"] / kernel["seconds"][target["name"]]
        if p.inside(x, y):
            color = KIND_COLORS.get(kernel["kind"], "#000")
            out.append(marker(MARKERS.get(fn, "circle"), p.px(x), p.py(y), color))
    for row in measured:
        x, y = row["intensity"], row["flops_per_second"]
        if x > 0 and y > 0 and p.inside(x, y):
            color = KIND_COLORS[OP_KINDS.get(row["kind"], "elementwise")]
            shape = "diamond" if row["function"] == "decode" else "square"
            out.append(marker(shape, p.px(x), p.py(y), color, hollow=True, size=5))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="qcc --report=json output")
    ap.add_argument("--profile", help="qrun --profile-json output (measured points on the CPU panel)")
    ap.add_argument("--function", action="append",
                    help="entry points to plot (repeatable; default: prefill and decode, else main)")
    ap.add_argument("--title", help="figure title (default: the model and its shapes)")
    ap.add_argument("-o", "--output", default="roofline.svg", help="SVG file to write")
    args = ap.parse_args()

    report = json.load(open(args.report))
    if report.get("schema") != "qcc-roofline/1":
        sys.exit(f"{args.report}: not a qcc --report=json file")
    functions = {f["name"]: f for f in report["functions"]}
    wanted = args.function or [n for n in ("prefill", "prefill_last", "decode")
                               if n in functions] or ["main"]
    for name in wanted:
        if name not in functions:
            sys.exit(f"{args.report}: no entry point '{name}' (has {', '.join(functions)})")
    measured = []
    if args.profile:
        profile = json.load(open(args.profile))
        measured = [r for r in profile["rows"] if r["kind"] != "(all nodes)"]

    targets = report["targets"]
    points = [(name, k) for name in wanted for k in functions[name]["kernels"]]
    plotted = [(fn, k) for fn, k in points if k["flops"] > 0 and k["bytes"] > 0]
    dropped = len(points) - len(plotted)
    xs = [k["intensity"] for _, k in plotted] + [r["intensity"] for r in measured if r["intensity"] > 0]
    ys = [r["flops_per_second"] for r in measured if r["flops_per_second"] > 0]
    for t in targets:
        ys += [k["flops"] / k["seconds"][t["name"]] for _, k in plotted]
        xs += [t["i8"] / t["bandwidth"]]
    xlim = (10 ** math.floor(math.log10(min(xs) / 2)), 10 ** math.ceil(math.log10(max(xs) * 4)))
    ylim = (10 ** math.floor(math.log10(min(ys) / 2)),
            10 ** math.ceil(math.log10(max(t["i8"] for t in targets) * 1.5)))

    width = PANEL_W * len(targets)
    height = PANEL_H + LEGEND_H + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    shapes = ", ".join(
        f"{n}: batch {functions[n]['batch']}, "
        + (f"1 token over {functions[n]['cached']} cached" if n == "decode"
           else f"{functions[n]['tokens']} tokens") for n in wanted)
    title = args.title or f"Roofline of {report['model']} ({shapes})"
    out.append(f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="17" font-weight="bold">{esc(title)}</text>')
    for i, t in enumerate(targets):
        panel = Panel(i * PANEL_W, 34, xlim, ylim)
        title = t["name"] + (" (this machine)" if t["name"] == "CPU" else " (predicted)")
        draw_panel(out, panel, t, plotted, measured if t["name"] == "CPU" else [], title)
    # Legend: kinds (colour), entry points (shape), measured points.
    y = 34 + PANEL_H + 16
    kinds = sorted({k["kind"] for _, k in plotted}
                   | {OP_KINDS.get(r["kind"], "elementwise") for r in measured if r["flops"] > 0})
    x = 20
    for kind in kinds:
        out.append(marker("circle", x, y, KIND_COLORS.get(kind, "#000")))
        out.append(f'<text x="{x + 10}" y="{y + 4}" font-size="13">{esc(kind)}</text>')
        x += 24 + 8 * len(kind)
    y += 24
    x = 20
    for name in wanted:
        out.append(marker(MARKERS.get(name, "circle"), x, y, "#444"))
        out.append(f'<text x="{x + 10}" y="{y + 4}" font-size="13">{esc(name)} (predicted, on the roof)</text>')
        x += 250
    if measured:
        out.append(marker("square", x, y, "#444", hollow=True))
        out.append(marker("diamond", x + 16, y, "#444", hollow=True))
        out.append(f'<text x="{x + 26}" y="{y + 4}" font-size="13">prefill / decode measured by '
                   'qrun --profile (CPU, per op kind)</text>')
    y += 24
    note = (f"{len(plotted)} kernels plotted; {dropped} without FLOPs (gathers) left out. "
            "Left of a roof's ridge a kernel is memory-bound (MBU is its figure of merit), right of it compute-bound (MFU).")
    out.append(f'<text x="20" y="{y + 4}" font-size="12" fill="#444">{esc(note)}</text>')
    out.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {args.output}: {len(plotted)} kernels on {len(targets)} rooflines", file=sys.stderr)


if __name__ == "__main__":
    main()
