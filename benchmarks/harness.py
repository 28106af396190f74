"""What every benchmark script shares: its argument parser, its JSON output, and how it times work.

Run the scripts from the repository root (``python benchmarks/NAME.py ...``); they use genzoo's
public API only. Data comes from ``--data-root`` (default: genzoo's own, ``$GENZOO_DATA_ROOT`` or
``./data``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable


def parser(doc: str, *, data: bool = False, output: bool = True) -> argparse.ArgumentParser:
    """An argument parser showing ``doc`` as its help; ``--data-root`` with ``data``, ``--json OUT`` with ``output``."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if data:
        p.add_argument("--data-root", default=None, help="where datasets live (default: $GENZOO_DATA_ROOT or ./data)")
    if output:
        p.add_argument("--json", default=None, metavar="OUT", help="also write the results to this JSON file")
    return p


def write_json(path: str | None, result: Any) -> None:
    """Write ``result`` to ``path`` as indented JSON (nothing if ``path`` is None)."""
    if path is None:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=2, default=str) + "\n")


def median_seconds(work: Callable[[], object], rounds: int, warmup: int = 2) -> float:
    """The median wall time of ``rounds`` calls of ``work`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        work()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_seconds(works: dict[str, Callable[[], object]], rounds: int, warmup: int = 1) -> dict[str, float]:
    """The median wall time of each work, timed in turn within every round, so that a change in the
    machine's load hits all of them alike."""
    for _ in range(warmup):
        for work in works.values():
            work()
    times: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(rounds):
        for name, work in works.items():
            start = time.perf_counter()
            work()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def machine() -> str:
    """The CPU's model name, family and model (AMD's family 25 model 17 is Zen 4, family 26 Zen 5), its bf16 support
    and the threads torch uses, for the JSON a benchmark writes."""
    import torch

    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name", "unknown CPU")
    family = f" (family {fields['cpu family']}, model {fields['model']})" if "cpu family" in fields else ""
    flags = fields.get("flags", "").split()
    bf16 = ", AMX" if "amx_bf16" in flags else ", AVX512-BF16" if "avx512_bf16" in flags else ""
    return f"{name}{family}{bf16}, {torch.get_num_threads()} threads"

