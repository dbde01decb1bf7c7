"""bench/ is scripts, not a package: its harness is imported as the scripts import it, from bench/."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
