"""Usage over time as inline SVG (no script, no image request): one line per series over shared time buckets.
Colors are SVG attributes, not CSS, so the strict CSP (no inline style) allows them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .html import esc, when

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 760, 220, 60, 30, 10


def lines(title: str, buckets: Sequence[int], series: Mapping[str, Mapping[int, int]], most: int = 8) -> str:
    """`series`: name → {bucket start: value}; the `most` largest series are drawn, with a legend."""
    if not buckets:
        return f'<p class="empty">{esc(title)}: no responses in this window</p>'
    ranked = sorted(series.items(), key=lambda kv: -sum(kv[1].values()))[:most]
    top = max([1, *(v for _, values in ranked for v in values.values())])
    span = max(1, len(buckets) - 1)
    inner_w, inner_h = WIDTH - LEFT - 10, HEIGHT - BOTTOM - TOP

    def x(i: int) -> float:
        return LEFT + inner_w * i / span

    def y(v: int) -> float:
        return TOP + inner_h * (1 - v / top)

    parts = [f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{esc(title)}"><title>{esc(title)}</title>',
             f'<line x1="{LEFT}" y1="{TOP + inner_h}" x2="{WIDTH - 10}" y2="{TOP + inner_h}" stroke="#888"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + inner_h}" stroke="#888"/>',
             f'<text x="{LEFT - 6}" y="{TOP + 10}" text-anchor="end" font-size="11" fill="#444">{top}</text>',
             f'<text x="{LEFT - 6}" y="{TOP + inner_h}" text-anchor="end" font-size="11" fill="#444">0</text>',
             f'<text x="{LEFT}" y="{HEIGHT - 8}" font-size="11" fill="#444">{when(buckets[0])}</text>',
             f'<text x="{WIDTH - 10}" y="{HEIGHT - 8}" text-anchor="end" font-size="11" fill="#444">'
             f'{when(buckets[-1])}</text>']
    legend = []
    for n, (name, values) in enumerate(ranked):
        color = COLORS[n % len(COLORS)]
        points = " ".join(f"{x(i):.1f},{y(values.get(b, 0)):.1f}" for i, b in enumerate(buckets))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}">'
                     f"<title>{esc(name)}</title></polyline>")
        if len(buckets) == 1:
            parts.append(f'<circle cx="{x(0):.1f}" cy="{y(values.get(buckets[0], 0)):.1f}" r="4" fill="{color}"/>')
        legend.append(f'<li><svg width="12" height="12"><rect width="12" height="12" fill="{color}"/></svg> '
                      f"{esc(name)} ({sum(values.values())})</li>")
    parts.append("</svg>")
    return f'<figure><figcaption>{esc(title)}</figcaption>{"".join(parts)}<ul class="legend">{"".join(legend)}</ul></figure>'
