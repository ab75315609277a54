"""Run the default test suite several times in a row with every core kept busy.

    python -m tests.stress_suite [RUNS] [pytest args...]      (`make test-stress`)

A flaky test is a real bug: this finds the ones that only fail on a busy
machine (a fixed sleep, a shared port, a timing assertion). One CPU burner per
core runs for the whole time; it stops with this script. Prints each run's
result and exits non-zero at the first failing run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv and argv[0].isdigit() else 5
    extra = argv[1:] if argv and argv[0].isdigit() else argv
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)
    ]
    try:
        for run in range(1, runs + 1):
            started = time.monotonic()
            result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra])
            minutes = (time.monotonic() - started) / 60
            print(f"stress run {run}/{runs}: {'passed' if result.returncode == 0 else 'FAILED'} in {minutes:.1f} min", flush=True)
            if result.returncode != 0:
                return result.returncode
        print(f"{runs} runs in a row passed with {len(burners)} CPU burners", flush=True)
        return 0
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
