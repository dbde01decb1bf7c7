"""bench/ is scripts, not a package: its harness is imported as the scripts import it, from bench/
(put last on the path, so none of its scripts' names hides a module of the project's)."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))
