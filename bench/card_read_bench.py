#!/usr/bin/env python
"""The card read behind every board push and move answer: ``board_cards(task_ids=[one])``, in-process,
CPU milliseconds per call (building, compiling and running the card query), on a throwaway SQLite
database of 200 tasks. Runs from any tree of this repository (an older one keeps board_cards in
board/board_selectors.py), so bench/ab.py --output-only can set two commits side by side.

Run: .venv/bin/python bench/card_read_bench.py [--calls 500] [--rounds 5]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.figures import Recorder, add_option

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per round (default 500)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is reported (default 5)")
    add_option(parser)  # --no-record
    args = parser.parse_args()
    recorder = Recorder("card_read_bench.py", enabled=not args.no_record)
    with tempfile.TemporaryDirectory(prefix="switchyard-card-read-") as folder:  # the database goes with it
        recorder.record("board.card_read", measure(args, folder))
    print(recorder.note())


def measure(args: argparse.Namespace, folder: str) -> float:
    os.environ.update(DJANGO_SETTINGS_MODULE="config.settings.local", DATABASE_URL=f"sqlite:///{folder}/db.sqlite3")
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from board.models import Task

    try:
        from board.selectors import board_cards
    except ImportError:  # before issue 14 moved it
        from board.board_selectors import board_cards

    Task.objects.bulk_create([Task(title=f"Task {n}", rank=n) for n in range(200)])
    ids = list(Task.objects.values_list("pk", flat=True)[:50])
    for n in range(200):  # warm-up: caches, compiled templates, the connection
        board_cards(task_ids=[ids[n % 50]])
    rounds = []
    for _ in range(args.rounds):
        started = time.process_time()
        for n in range(args.calls):
            board_cards(task_ids=[ids[n % 50]])
        rounds.append((time.process_time() - started) / args.calls * 1000)
    print(
        f"card read: board_cards(one task) {statistics.median(rounds):.2f} ms CPU per call "
        f"(rounds: {', '.join(f'{r:.2f}' for r in rounds)})"
    )
    return statistics.median(rounds)


if __name__ == "__main__":
    main()
