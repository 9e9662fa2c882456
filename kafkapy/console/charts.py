"""Line charts rendered as inline SVG on the server: no charting library, no JavaScript, nothing
fetched at install time, and a page shows its plots as soon as its HTML arrives."""
from __future__ import annotations

import math
import time
from html import escape

__all__ = ["line_chart", "human"]

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")
WIDTH, HEIGHT = 560, 170
LEFT, RIGHT, TOP, BOTTOM = 56, 10, 12, 34


def human(value: float, unit: str = "") -> str:
    """1234567 -> "1.23M" (binary-free SI, as dashboards show rates)."""
    if value is None:
        return "-"
    if unit == "ms" and abs(value) >= 1000:
        return f"{value / 1000:.3g}s"
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}{unit}"
    return f"{value:.3g}{unit}" if value != int(value) else f"{int(value)}{unit}"


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], unit: str = "",
               window_s: float = 3600.0, now: float | None = None) -> str:
    """An SVG chart of `series` (label -> [(unix time, value)]) over the last `window_s` seconds."""
    now = time.time() if now is None else now
    start = now - window_s
    points = {label: [(t, v) for t, v in data if t >= start] for label, data in series.items()}
    top = max((v for data in points.values() for _, v in data), default=0.0)
    top = _nice_ceiling(top)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (t - start) / window_s * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - (v / top * plot_h if top else 0)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
             f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for i in range(5):
        value = top * i / 4
        yy = y(value)
        parts.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{WIDTH - RIGHT}" y2="{yy:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{yy + 4:.1f}" text-anchor="end">{escape(human(value, unit))}</text>')
    for quarter in (4, 3, 2, 1, 0):
        ago = window_s * quarter / 4
        xx = x(now - ago)
        label = "now" if quarter == 0 else f"-{ago / 60:g}m" if ago >= 120 else f"-{ago:g}s"
        parts.append(f'<text x="{xx:.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle">{label}</text>')
    legend_x, legend_y = LEFT, HEIGHT - 12
    for i, (label, data) in enumerate(points.items()):
        color = COLORS[i % len(COLORS)]
        if len(data) >= 2:
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in data)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{path}"/>')
        elif data:
            t, v = data[0]
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>')
        last = human(data[-1][1], unit) if data else "no data"
        text = f"{label}: {last}"
        width = 20 + 5.6 * len(text)
        if legend_x > LEFT and legend_x + width > WIDTH:  # next legend line
            legend_x, legend_y = LEFT, legend_y + 13
        parts.append(f'<rect x="{legend_x:.0f}" y="{legend_y}" width="9" height="9" fill="{color}"/>'
                     f'<text x="{legend_x + 12:.0f}" y="{legend_y + 8}">{escape(text)}</text>')
        legend_x += width
    height = legend_y + 14
    parts[0] = parts[0].replace(f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"',
                                f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}"')
    if not any(points.values()):
        parts.append(f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h / 2}" text-anchor="middle" '
                     f'class="empty">no samples yet</text>')
    parts.append("</svg>")
    return "".join(parts)


def _nice_ceiling(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude
