"""How many threads a genzoo process should use when other work already holds the cores.

    python benchmarks/threads.py --busy 0,1,2 --json benchmarks/results/threads.json

For each number of busy cores (``--busy``: that many competing processes, each spinning one core at the same
priority), a fresh process times one forward pass of edm-mnist's network on a batch of 64 digits (the median of
``--rounds`` after two untimed passes) with: every core's thread (OpenMP's default, active waiting), every
core's thread with ``OMP_WAIT_POLICY=passive``, and one thread. Threads that wait actively for a core another
process holds spin away their time slices; the table says by how much on this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from harness import machine, parser, write_json

PASS = """
import statistics, time, torch, genzoo
model = genzoo.load("edm-mnist").eval()
x, sigma = torch.randn(64, 1, 28, 28), torch.full((64,), 1.0)
times = []
with torch.no_grad():
    for i in range({rounds} + 2):
        start = time.perf_counter()
        model.denoise(x, sigma)
        times.append(time.perf_counter() - start)
print(statistics.median(times[2:]))
"""
SPIN = "while True: pass"


def timed_pass(threads: int, wait_policy: str | None, rounds: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    env.pop("OMP_WAIT_POLICY", None)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    out = subprocess.run([sys.executable, "-c", PASS.format(rounds=rounds)], env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--busy", default="0,1,2", help="numbers of cores other processes hold, comma-separated")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    variants = {f"{cores} threads": (cores, None), f"{cores} threads, passive wait": (cores, "passive"),
                "1 thread": (1, None)}
    rows = []
    for busy in (int(b) for b in args.busy.split(",")):
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
        try:
            time.sleep(1)
            row = {"busy_cores": busy, "cores": cores}
            for name, (threads, policy) in variants.items():
                row[name] = round(timed_pass(threads, policy, args.rounds), 4)
            print(json.dumps(row), flush=True)
            rows.append(row)
        finally:
            for spinner in spinners:
                spinner.kill()
    write_json(args.json, {"what": "seconds of one edm-mnist forward pass at batch 64", "rounds": args.rounds,
                           "hardware": machine(), "rows": rows})


if __name__ == "__main__":
    main()
