#!/usr/bin/env python
"""An interleaved A/B of one benchmark between another commit and this tree, in one run.

    .venv/bin/python bench/ab.py --base 62eb11e --rounds 3 -- run.py --parts events,batch --duration 5
    .venv/bin/python bench/ab.py --base HEAD~3 -- client_bench.py --client-parts hook --hook-calls 200

The base commit's files are unpacked (``git archive``, nothing in this repository changes) into a
scratch folder, and the benchmark script is run from each tree in turn, ABBA order (A B, B A, A B,
...), with this venv's Python; the base's client package goes first on PYTHONPATH, so a client
benchmark runs the base's client too. Each run writes its result file in its own tree's
``bench/results/``; the figures are read back from those files (the ones a benchmark reports in its
table, by name) and set side by side: the median of each side and this tree / base. The machine's
speed drifts by the hour; alternating runs is what makes the two sides comparable.

The script's own options go after ``--``; each tree runs its own copy of the script, so a figure
the base did not have yet shows on one side only. No run of an A/B writes bench/figures.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from harness import RESULTS_DIR, ROOT, BenchError, say, stamp  # noqa: E402
from harness.figures import NO_RECORD_ENV  # noqa: E402
from harness.report import num, table, write_json, written  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/ab.py",
        description="Run one benchmark alternately from another commit and from this tree; compare its figures.",
        epilog="Example: bench/ab.py --base 62eb11e --rounds 3 -- run.py --parts events --duration 5",
    )
    parser.add_argument("--base", required=True, help="the commit to compare with (anything git rev-parse takes)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the base's scratch tree (its path is printed)")
    parser.add_argument(
        "--this",
        type=Path,
        default=ROOT,
        help="the tree to run as 'this' side (default: this checkout; e.g. a clone of HEAD, so editing here "
        "during a long A/B changes nothing)",
    )
    parser.add_argument(
        "--output-only",
        action="store_true",
        help="for a script that prints its figures but writes no result file (board_bench.py, sync_bench.py): "
        "keep each run's output in bench/results/ and compare by reading them",
    )
    parser.add_argument("script", help="the benchmark script in bench/, e.g. run.py")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="its options (after --)")
    return parser.parse_args(argv)


def unpack(commit: str, into: Path) -> str:
    """The base commit's tree in ``into``; returns the full commit id."""
    full = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if full.returncode:
        raise BenchError(f"no commit {commit!r}: {full.stderr.strip()}")
    archive = into / "base.tar"
    subprocess.run(["git", "archive", "-o", str(archive), full.stdout.strip()], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    archive.unlink()
    return full.stdout.strip()


def run_side(tree: Path, script: str, script_args: list[str], *, base: bool, output: Path | None = None) -> dict:
    """Run the script from ``tree``; its figures by name, from the result file it wrote (with
    ``output``: its output kept there instead, and no figures)."""
    results = tree / "bench" / "results"
    before = set(results.glob("*.json")) if results.exists() else set()
    env = dict(os.environ)
    env[NO_RECORD_ENV] = "1"  # an A/B's runs leave bench/figures.json as it is
    if base or tree.resolve() != ROOT.resolve():  # that tree's client, not this venv's editable one
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree / "client" / "src"), env.get("PYTHONPATH")]))
    command = [sys.executable, str(tree / "bench" / script), *script_args]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if output is not None:
        output.write_text(done.stdout + done.stderr)
        if done.returncode not in (0, 1):
            raise BenchError(f"{'base' if base else 'this tree'}: {script} exited {done.returncode}: see {output}")
        return {}
    written_now = sorted(set(results.glob("*.json")) - before) if results.exists() else []
    if done.returncode not in (0, 1) or not written_now:  # 1: a figure missed its aim, still a result
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise BenchError(f"{'base' if base else 'this tree'}: {script} exited {done.returncode}:\n{tail}")
    figures = {}
    for path in written_now:
        if base:  # the base's tree is deleted afterwards: its result files are kept beside ours
            (RESULTS_DIR / f"{path.stem}-base{path.suffix}").write_bytes(path.read_bytes())
        for figure in json.loads(path.read_text()).get("figures", []):
            figures[figure["name"]] = figure
    return figures


def compare(sides: dict[str, list[dict[str, dict]]]) -> list[dict]:
    names = list(dict.fromkeys(name for runs in sides.values() for figures in runs for name in figures))
    rows = []
    for name in names:
        row = {"figure": name}
        for side, runs in sides.items():
            values = [figures[name]["ours"] for figures in runs if name in figures and figures[name].get("ours")]
            p99s = [figures[name]["p99_ms"] for figures in runs if name in figures and figures[name].get("p99_ms")]
            row[side] = {"values": values, "median": statistics.median(values) if values else None}
            row[side]["p99_median"] = statistics.median(p99s) if p99s else None
            row["unit"] = (
                next((figures[name].get("unit") for figures in runs if name in figures), row.get("unit")) or ""
            )
        base, ours = row["base"]["median"], row["this"]["median"]
        row["ratio"] = ours / base if base and ours else None
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    if not (BENCH_DIR / args.script).is_file():
        print(f"bench/ab.py: no benchmark bench/{args.script}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="switchyard-ab-"))
    run_stamp = stamp()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    try:
        commit = unpack(args.base, scratch)
        say(f"base {commit[:12]} unpacked in {scratch / 'tree'}; {args.rounds} rounds of {args.script}, ABBA")
        sides: dict[str, list] = {"base": [], "this": []}
        for round_ in range(args.rounds):
            order = [("base", True), ("this", False)] if round_ % 2 == 0 else [("this", False), ("base", True)]
            for side, is_base in order:
                started = time.monotonic()
                tree = scratch / "tree" if is_base else args.this.resolve()
                output = RESULTS_DIR / f"{run_stamp}-ab-{side}-{round_ + 1}.log" if args.output_only else None
                sides[side].append(run_side(tree, args.script, script_args, base=is_base, output=output))
                say(
                    f"round {round_ + 1}: {side} done in {time.monotonic() - started:.0f} s"
                    + (f": {output}" if output else "")
                )
    except BenchError as exc:
        print(f"bench/ab.py: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            say(f"kept {scratch}")
        else:
            subprocess.run(["rm", "-rf", str(scratch)], check=False)
    if args.output_only:
        say(f"outputs kept in {RESULTS_DIR}/{run_stamp}-ab-*.log: compare the figures they print")
        return 0
    rows = compare(sides)
    print()
    print(
        table(
            ["figure", "unit", f"base {commit[:9]}", "this tree", "this / base", "p99 base", "p99 this"],
            [
                [
                    r["figure"],
                    r["unit"],
                    num(r["base"]["median"], 1),
                    num(r["this"]["median"], 1),
                    f"{r['ratio']:.2f}" if r["ratio"] else "-",
                    num(r["base"]["p99_median"], 1),
                    num(r["this"]["p99_median"], 1),
                ]
                for r in rows
            ],
        )
    )
    out = write_json(
        RESULTS_DIR / f"{stamp()}-ab.json",
        {"base": commit, "script": args.script, "args": script_args, "rounds": args.rounds, "figures": rows},
    )
    written(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
