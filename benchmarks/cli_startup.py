"""How long `genzoo --help` takes, as a user waits for it: wall time of the whole process.

    python benchmarks/cli_startup.py [--rounds 10] [--json OUT]

Runs the installed `genzoo` console script (beside this Python) with `--help`, and for scale
`python -c pass`, each ``--rounds`` times after one untimed run, and reports the median wall time
of each and whether the help imported torch (it must not: the verbs are imported when they run).
The target is under 0.5 s on an idle 2-core machine. Run it on an idle machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from genzoo.hardware import cpu_name
from harness import median_seconds, parser, write_json

PROBE = ("import sys; from genzoo.cli import cli; cli.main(['--help'], standalone_mode=False); "
         "print('torch' in sys.modules)")


def genzoo_script() -> list[str]:
    """The `genzoo` command installed beside this interpreter (else `python -m genzoo`)."""
    script = Path(sys.executable).with_name("genzoo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "genzoo"]


def run(command: list[str]) -> None:
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rounds", type=int, default=10, help="timed runs of each command (default 10)")
    args = p.parse_args()
    command = [*genzoo_script(), "--help"]
    imports_torch = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                                   text=True).stdout.split()[-1] == "True"
    help_seconds = median_seconds(lambda: run(command), args.rounds, warmup=1)
    python_seconds = median_seconds(lambda: run([sys.executable, "-c", "pass"]), args.rounds, warmup=1)
    result = {"command": " ".join(["genzoo", "--help"]), "rounds": args.rounds, "cpu": cpu_name(),
              "help_seconds": round(help_seconds, 3), "python_seconds": round(python_seconds, 3),
              "help_imports_torch": imports_torch}
    print(f"genzoo --help: {help_seconds:.3f} s median of {args.rounds} (python -c pass: {python_seconds:.3f} s); "
          f"imports torch: {imports_torch}; {result['cpu']}")
    write_json(args.json, result)


if __name__ == "__main__":
    main()
