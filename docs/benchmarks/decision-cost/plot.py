#!/usr/bin/env python3
"""Instructions per decision against CPU count, from tables printed by
tools/bench/decision-cost: an SVG with one line per load and batch size (log-log
axes: a cost that grows linearly with the CPUs is a line of slope 1), and on
stdout each line's per-CPU slope. Python's standard library only: no plotting
package is needed.

usage: plot.py OUT.svg TABLE.md[=LABEL] [TABLE.md[=LABEL] ...]
  Each table's lines are drawn in its own dash pattern (the first solid), so that
  a before and an after run can share one plot; LABEL names the table in the
  legend and on stdout (default: the file's name).
"""
import math
import pathlib
import sys


def read_table(path):
    """{(load, batch): {cpus: instructions per decision}} from a decision-cost table."""
    rows = {}
    for line in pathlib.Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 8 or not cells[3].isdigit():
            continue
        load, batch, _machine, cpus, _preset, _batches, _decisions, ipd = cells
        rows.setdefault((load, batch), {})[int(cpus)] = int(ipd.replace(",", ""))
    if not rows:
        sys.exit(f"{path}: no decision-cost table rows")
    return rows


def slope(points):
    """Least-squares slope of instructions per decision on CPUs."""
    xs, ys = zip(*sorted(points.items()))
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def batch_size(batch):
    """Wake-ups a batch, as a number (the mean of a drawn range)."""
    lo, _, hi = batch.partition("-")
    return (int(lo) + int(hi or lo)) / 2


W, H = 820, 520
LEFT, RIGHT, TOP, BOTTOM = 80, 250, 40, 60
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]
DASHES = ["", "6,4", "2,3", "10,3,2,3"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    tables = []
    for arg in sys.argv[2:]:
        path, _, label = arg.partition("=")
        tables.append((label or pathlib.Path(path).name, read_table(path)))

    all_cpus = sorted({c for _, t in tables for pts in t.values() for c in pts})
    all_ipd = [v for _, t in tables for pts in t.values() for v in pts.values()]
    x0, x1 = math.log2(all_cpus[0]), math.log2(all_cpus[-1])
    # The y axis from the 1-2-5 step below the lowest point to the one above the highest.
    steps = [m * 10**d for d in range(0, 10) for m in (1, 2, 5)]
    y0 = math.log10(max(v for v in steps if v <= min(all_ipd)))
    y1 = math.log10(min(v for v in steps if v >= max(all_ipd)))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(cpus):
        return LEFT + (math.log2(cpus) - x0) / (x1 - x0) * pw

    def py(ipd):
        return TOP + ph - (math.log10(ipd) - y0) / (y1 - y0) * ph

    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT + pw / 2}" y="22" text-anchor="middle" font-size="14">'
        "The agent's instructions per decision (read_cpus + begin_batch + place)</text>",
    ]
    # Grid and ticks: every power of two on x, 1-2-5 on y.
    cpus = 2 ** math.ceil(x0)
    while cpus <= 2**x1:
        x = px(cpus)
        svg.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" stroke="#ddd"/>')
        svg.append(f'<text x="{x:.1f}" y="{TOP + ph + 18}" text-anchor="middle">{cpus}</text>')
        cpus *= 2
    for v in steps:
        if 10**y0 - 0.5 <= v <= 10**y1 + 0.5:
            y = py(v)
            svg.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" '
                       f'stroke="{"#bbb" if str(v)[0] == "1" else "#eee"}"/>')
            svg.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{v:,}</text>')
    svg.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    svg.append(f'<text x="{LEFT + pw / 2}" y="{H - 18}" text-anchor="middle">'
               "CPUs (log scale)</text>")
    svg.append(f'<text transform="translate(18,{TOP + ph / 2}) rotate(-90)" '
               'text-anchor="middle">instructions per decision (log scale)</text>')

    print("| table | load | batch | slope, least squares (instructions per decision per CPU) "
          "| slope, 256 to 1024 CPUs | the same per batch |")
    print("|---|---|---|---|---|---|")
    legend_y = TOP + 10
    for ti, (label, table) in enumerate(tables):
        for li, ((load, batch), pts) in enumerate(table.items()):
            colour, dash = COLOURS[li % len(COLOURS)], DASHES[ti % len(DASHES)]
            path = " ".join(f"{px(c):.1f},{py(v):.1f}" for c, v in sorted(pts.items()))
            svg.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"'
                       + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
            for c, v in pts.items():
                svg.append(f'<circle cx="{px(c):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}"/>')
            lx = LEFT + pw + 15
            svg.append(f'<line x1="{lx}" y1="{legend_y}" x2="{lx + 30}" y2="{legend_y}" '
                       f'stroke="{colour}" stroke-width="2"'
                       + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
            name = f"{load}, {batch} a batch" + (f" ({label})" if len(tables) > 1 else "")
            svg.append(f'<text x="{lx + 36}" y="{legend_y + 4}">{name}</text>')
            legend_y += 20
            s = slope(pts)
            tail = ""
            if 256 in pts and 1024 in pts:
                tail = (pts[1024] - pts[256]) / 768
            per_batch = f"{tail * batch_size(batch):,.0f}" if tail != "" else ""
            print(f"| {label} | {load} | {batch} | {s:,.1f} | "
                  + (f"{tail:,.1f}" if tail != "" else "") + f" | {per_batch} |")
        legend_y += 10
    svg.append("</svg>")
    pathlib.Path(out).write_text("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
