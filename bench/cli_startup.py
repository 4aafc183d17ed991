"""Start-up time of the ``tmsim`` command line, in wall-clock seconds.

Each command runs in a fresh interpreter (``python -c "from tmsim.cli.main import main; ..."``,
what the ``tmsim`` script does), best and median of :data:`RUNS` runs; ``python -c pass``
is the floor an interpreter with this environment's site packages costs. Then the slowest
imports of ``tmsim --version`` by ``python -X importtime`` (cumulative microseconds) and
whether any heavy library was imported. A command that refuses its arguments (``plan
--window 0``) is timed too: refusing must not wait for the planners to import.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 7
ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (
    ["--version"],
    ["--help"],
    ["plan", "--help"],
    ["plan", "vgg19", "--window", "0"],
    ["platforms"],
)
HEAVY = ("numpy", "scipy", "cvxpy", "pandas", "pyarrow", "simpy", "matplotlib")


def _seconds(code: str) -> list[float]:
    out = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=False)
        out.append(time.perf_counter() - t0)
    return out


def _row(label: str, code: str) -> None:
    s = _seconds(code)
    print(f"{label:36s} {min(s):8.3f} {statistics.median(s):8.3f}")


def main() -> None:
    print(f"{'command (fresh interpreter)':36s} {'best s':>8s} {'median s':>8s}  ({RUNS} runs)")
    _row("python -c pass", "pass")
    for argv in COMMANDS:
        code = f"import sys; from tmsim.cli.main import main; sys.exit(main({argv!r}))"
        _row("tmsim " + " ".join(argv), code)
    probe = (
        "import sys\nfrom tmsim.cli.main import main\ntry:\n    main(['--version'])\n"
        "except SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    print("slowest imports of tmsim --version (cumulative us):")
    for us, name in sorted(rows, reverse=True)[:8]:
        print(f"  {us:>9,d}  {name}")
    heavy = done.stdout.strip().splitlines()[-1:] or ["?"]
    print(f"heavy libraries imported by tmsim --version: {heavy[0]}")
