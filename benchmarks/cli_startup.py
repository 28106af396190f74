"""How long the quick commands take, as a user waits for them: wall and CPU time of the whole process.

    python benchmarks/cli_startup.py [--rounds 10] [--json OUT]

Runs the installed `genzoo` console script (beside this Python) with `--help`, `list` and `info ign-mnist`,
and for scale `python -c pass`, each ``--rounds`` times after one untimed run, and reports the median wall
time and the median CPU time (user + system) of each. `list` and `info` are timed twice: with the catalogue
snapshot current (what every run after the first sees) and with it missing (the first run after a plugin,
genzoo or registry.yaml changed, which loads every plugin and so imports torch). It also reports whether each
command imported torch (`--help` must not, nor `list` and `info` with a current snapshot).

Python's bytecode cache is on (in a temporary PYTHONPYCACHEPREFIX), as an installed genzoo has it, whatever
PYTHONDONTWRITEBYTECODE says. The targets, on an idle 2-core machine: `--help` under 0.5 s, `list` and
`info` under 1 s. On a busy machine the wall times grow with the load; the CPU times much less.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from genzoo.hardware import cpu_name
from harness import parser, write_json

COMMANDS = {"help": ["--help"], "list": ["list"], "info": ["info", "ign-mnist"]}
SNAPSHOT_COMMANDS = ("list", "info")  # the commands that read the catalogue snapshot
PROBE = ("import sys; from genzoo.cli import cli; cli.main({args!r}, standalone_mode=False); "
         "print('imports torch:', 'torch' in sys.modules)")


def genzoo_script() -> list[str]:
    """The `genzoo` command installed beside this interpreter (else `python -m genzoo`)."""
    script = Path(sys.executable).with_name("genzoo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "genzoo"]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(command: list[str], env: dict[str, str], rounds: int, fresh_cache: bool = False) -> dict[str, float]:
    """The median wall and CPU seconds of ``rounds`` runs after one untimed run; ``fresh_cache``: each run
    starts with an empty genzoo cache folder (no catalogue snapshot)."""
    runs = []
    for i in range(rounds + 1):
        with tempfile.TemporaryDirectory(prefix="genzoo-cache-") as cache:
            run_env = {**env, "GENZOO_CACHE": cache} if fresh_cache else env
            result = timed(command, run_env)
        if i:
            runs.append(result)
    return {"wall_seconds": round(statistics.median(w for w, _ in runs), 3),
            "cpu_seconds": round(statistics.median(c for _, c in runs), 3)}


def imports_torch(args: list[str], env: dict[str, str]) -> bool:
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], check=True, capture_output=True,
                          text=True, env=env)
    return done.stdout.strip().splitlines()[-1] == "imports torch: True"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rounds", type=int, default=10, help="timed runs of each command (default 10)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="genzoo-bench-") as scratch:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=str(Path(scratch) / "pycache"), GENZOO_CACHE=str(Path(scratch) / "cache"))
        result = {"rounds": args.rounds, "cpu": cpu_name(), "load_average": os.getloadavg()[0],
                  "python": medians([sys.executable, "-c", "pass"], env, args.rounds), "commands": {}}
        for name, words in COMMANDS.items():
            command = [*genzoo_script(), *words]
            row = {"command": " ".join(["genzoo", *words]), **medians(command, env, args.rounds),
                   "imports_torch": imports_torch(words, env)}
            if name in SNAPSHOT_COMMANDS:
                row["without_snapshot"] = medians(command, env, args.rounds, fresh_cache=True)
            result["commands"][name] = row
    for row in result["commands"].values():
        cold = row.get("without_snapshot")
        print(f"{row['command']}: {row['wall_seconds']:.3f} s wall, {row['cpu_seconds']:.3f} s CPU (median of "
              f"{args.rounds}); imports torch: {row['imports_torch']}"
              + (f"; without a snapshot {cold['wall_seconds']:.3f} s wall, {cold['cpu_seconds']:.3f} s CPU"
                 if cold else ""))
    print(f"python -c pass: {result['python']['wall_seconds']:.3f} s wall; {result['cpu']}; "
          f"load average {result['load_average']:.2f} at the start")
    write_json(args.json, result)


if __name__ == "__main__":
    main()
