#!/usr/bin/env python
"""Merging a task branch of 200 commits into the default branch (issue 25: <= 1.2 x ``git merge``
alone on the same repository): ``runners.ship_merge.task_merge`` in-process (the rules, the row lock,
``git merge-tree``, ``commit-tree``, the checkout fast-forwarded, the task to Done) against
``git merge --no-ff --no-edit`` of the same branch in the same checkout. Rounds alternate between
the two; after each, the default branch and its checkout go back to where they were (``git reset
--hard``) and the task back to Review. A throwaway SQLite database and a repository of --files files
in which main moved on by 5 commits since the branch left it, so both do a real three-way merge.

Run: .venv/bin/python bench/merge_bench.py [--rounds 15] [--commits 200] [--files 2000]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.figures import Recorder, add_option

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"}


def git(folder: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY}
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True, env=env).stdout


def make_repository(folder: Path, *, files: int, commits: int) -> None:
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    for n in range(files):
        path = folder / f"src/pkg{n % 40}/module_{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"value_{n}_{line} = {line}\n" for line in range(30)))
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "Initial")
    git(folder, "checkout", "-q", "-b", "task-1")
    for n in range(commits):  # each commit edits its own file: the agent's 200 steps
        path = folder / f"src/pkg{n % 40}/module_{n}.py"
        path.write_text(path.read_text().replace(f"value_{n}_3 = 3", f"value_{n}_3 = {n} * 3"))
        git(folder, "commit", "-q", "-am", f"Step {n}")
    git(folder, "checkout", "-q", "main")
    for n in range(5):  # main moved on elsewhere in the tree
        other = files - 1 - n
        path = folder / f"src/pkg{other % 40}/module_{other}.py"
        path.write_text(path.read_text() + "# main\n")
        git(folder, "commit", "-q", "-am", f"Main {n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="rounds of each; medians reported (default 15)")
    parser.add_argument("--commits", type=int, default=200, help="commits on the task branch (default 200)")
    parser.add_argument("--files", type=int, default=2000, help="files in the repository (default 2000)")
    add_option(parser)
    args = parser.parse_args()
    recorder = Recorder("merge_bench.py", enabled=not args.no_record)
    with tempfile.TemporaryDirectory(prefix="switchyard-merge-bench-") as folder:
        ours, raw = measure(args, Path(folder))
    recorder.record("ship.merge_200_commits", ours, raw=raw)
    print(f"merge of {args.commits} commits: task_merge {ours:.1f} ms, git merge {raw:.1f} ms, ratio {ours / raw:.2f}")
    print(recorder.note())


def measure(args: argparse.Namespace, folder: Path) -> tuple[float, float]:
    clone = folder / "app"
    make_repository(clone, files=args.files, commits=args.commits)
    os.environ.update(DJANGO_SETTINGS_MODULE="config.settings.local", DATABASE_URL=f"sqlite:///{folder}/db.sqlite3")
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from board.models import Task
    from config.actors import Actor
    from runners.models import Run
    from runners.ship_merge import task_merge
    from workspaces.worktrees.services import repository_register

    repository, _ = repository_register(path=str(clone))
    task = Task.objects.create(pk=1, title="Bench", repository=repository, status=Task.Status.REVIEW)
    Run.objects.create(task=task, provider="demo", status=Run.Status.SUCCEEDED)
    actor = Actor(user=get_user_model().objects.create_user("bench", is_staff=True))
    tip = git(clone, "rev-parse", "main").strip()

    def reset() -> None:
        git(clone, "reset", "-q", "--hard", tip)
        Task.objects.filter(pk=1).update(status=Task.Status.REVIEW)

    def service() -> float:
        started = time.perf_counter()
        task_merge(actor=actor, task=Task.objects.get(pk=1), strategy="merge", force=True)
        return (time.perf_counter() - started) * 1000

    def plain() -> float:
        started = time.perf_counter()
        git(clone, "merge", "-q", "--no-ff", "--no-edit", "task-1")
        return (time.perf_counter() - started) * 1000

    for run in (service, plain):  # warm-up: the page cache, imports, the connection
        run()
        reset()
    ours, raw = [], []
    for _ in range(args.rounds):
        for run, into in ((service, ours), (plain, raw)):
            into.append(run())
            reset()
    print(f"task_merge ms: {', '.join(f'{x:.0f}' for x in ours)}")
    print(f"git merge ms:  {', '.join(f'{x:.0f}' for x in raw)}")
    return statistics.median(ours), statistics.median(raw)


if __name__ == "__main__":
    main()
