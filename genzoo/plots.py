"""Loss curves of a run, drawn from its metrics.jsonl into a PNG (Pillow only, no plotting library).

One panel per logged scalar: the per-step values in grey, their running mean in colour, the step
range below and the value range beside it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .errors import GenzooError

PLOT_FILE = "losses.png"
PANEL_W, PANEL_H, MARGIN = 420, 190, 48
COLUMNS = 2


def read_log(run: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """{scalar: [(step, value), ...]} from RUN/metrics.jsonl."""
    path = Path(run) / "metrics.jsonl"
    if not path.is_file():
        raise GenzooError(f"{path} does not exist; pass a run directory written by genzoo fit")
    series: dict[str, list[tuple[int, float]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut off by an interrupted run
        step = record.get("step")
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and math.isfinite(value):
                series.setdefault(key, []).append((int(step), float(value)))
    if not series:
        raise GenzooError(f"{path} holds no logged values yet")
    return series


def plot_losses(run: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Draw every scalar of RUN/metrics.jsonl into ``out`` (default RUN/losses.png)."""
    from PIL import Image, ImageDraw

    series = read_log(run)
    names = ["loss", *sorted(k for k in series if k != "loss")] if "loss" in series else sorted(series)
    rows = math.ceil(len(names) / COLUMNS)
    image = Image.new("RGB", (COLUMNS * PANEL_W, rows * PANEL_H), "white")
    draw = ImageDraw.Draw(image)
    for i, name in enumerate(names):
        _panel(draw, name, series[name], (i % COLUMNS) * PANEL_W, (i // COLUMNS) * PANEL_H)
    out = Path(out) if out is not None else Path(run) / PLOT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    image.save(tmp, format="PNG")
    os.replace(tmp, out)
    return out


def _panel(draw, name: str, points: list[tuple[int, float]], left: int, top: int) -> None:
    x0, y0 = left + MARGIN, top + 22
    x1, y1 = left + PANEL_W - 12, top + PANEL_H - 26
    draw.rectangle([x0, y0, x1, y1], outline=(180, 180, 180))
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    low, high = min(values), max(values)
    if high == low:
        high, low = high + 0.5, low - 0.5
    first, last = steps[0], max(steps[-1], steps[0] + 1)

    def xy(step: float, value: float) -> tuple[float, float]:
        return (x0 + (step - first) / (last - first) * (x1 - x0), y1 - (value - low) / (high - low) * (y1 - y0))

    smoothed = _running_mean(values, max(1, len(values) // 50))
    draw.line([xy(s, v) for s, v in zip(steps, values)], fill=(200, 200, 200), width=1)
    draw.line([xy(s, v) for s, v in zip(steps, smoothed)], fill=(31, 119, 180), width=2)
    draw.text((x0, top + 6), f"{name}  (last {values[-1]:.4g}, mean of last 10% {_tail_mean(values):.4g})", fill="black")
    draw.text((left + 4, y0), f"{high:.3g}", fill=(90, 90, 90))
    draw.text((left + 4, y1 - 10), f"{low:.3g}", fill=(90, 90, 90))
    draw.text((x0, y1 + 6), f"step {first}", fill=(90, 90, 90))
    draw.text((x1 - 70, y1 + 6), f"step {steps[-1]}", fill=(90, 90, 90))


def _running_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _tail_mean(values: list[float]) -> float:
    tail = values[-max(1, len(values) // 10):]
    return sum(tail) / len(tail)
