"""Summarise py-spy collapsed stacks (``py-spy record --format raw``): where the samples went.

    python bench/profile_summary.py bench/results/<ts>-<part>-<pid>.txt [...]

Prints, as a share of all samples: time by library (self time grouped by top-level package),
the project's own functions and lines (inclusive), and the hottest functions (self and inclusive).
bench/run.py --profile records the files and puts the same summary in its JSON.
"""

import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_PACKAGES = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
FRAME_RE = re.compile(r"^(?P<name>.*) \((?P<file>[^():]+):(?P<line>\d+)\)$")


def _parse(frame: str) -> tuple[str, str, str]:
    match = FRAME_RE.match(frame)
    if not match:
        return frame, "", ""
    return match.group("name"), match.group("file"), match.group("line")


def _package(file: str) -> str:
    if not file:
        return "(native)"
    first = file.split("/", 1)[0]
    if first.endswith(".py"):
        return first[:-3]  # a stdlib module such as threading.py
    return first


def summarise(paths: list[Path], top: int = 15) -> dict:
    by_function: Counter = Counter()
    app_lines: Counter = Counter()
    own_function: Counter = Counter()
    own_package: Counter = Counter()
    total = 0
    for path in paths:
        for raw in path.read_text(errors="replace").splitlines():
            stack, _, count = raw.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [_parse(f) for f in stack.split(";")]
            seen_functions, seen_lines = set(), set()
            for name, file, line in frames:
                seen_functions.add(f"{name} ({file})")
                if _package(file) in APP_PACKAGES:
                    seen_lines.add(f"{file}:{line} {name}")
            for key in seen_functions:
                by_function[key] += n
            for key in seen_lines:
                app_lines[key] += n
            name, file, _ = frames[-1]
            own_function[f"{name} ({file})"] += n
            own_package[_package(file)] += n
    if not total:
        return {"samples": 0}

    def share(counter: Counter, keep=lambda key: True) -> list[dict]:
        rows = [{"where": k, "pct": round(100 * v / total, 1)} for k, v in counter.most_common() if keep(k)]
        return rows[:top]

    def is_app(key: str) -> bool:
        match = re.search(r"\(([^()]*)\)$", key)
        return bool(match) and _package(match.group(1)) in APP_PACKAGES

    return {
        "samples": total,
        "self_by_package": share(own_package),
        "app_lines_inclusive": share(app_lines),
        "app_functions_inclusive": share(by_function, is_app),
        "functions_self": share(own_function),
        "functions_inclusive": share(by_function),
    }


def render(summary: dict) -> str:
    if not summary.get("samples"):
        return "no samples"
    out = [f"{summary['samples']} samples"]
    for key, title in [
        ("self_by_package", "self time by package"),
        ("app_lines_inclusive", "project lines, inclusive"),
        ("functions_self", "functions, self"),
        ("functions_inclusive", "functions, inclusive"),
    ]:
        out.append(f"\n== {title}")
        out += [f"{row['pct']:5.1f}%  {row['where']}" for row in summary[key]]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(render(summarise([Path(p) for p in sys.argv[1:]], top=25)))
