#!/usr/bin/env python
"""Review benchmark (issue 25): the "Review the change" page and the diff's JSON.

(a) page    a task whose branch changes 5,000 lines across 200 files (25 each: 12 lines changed, 9
            apart, and one added, in Python files of 120 lines) in a real git clone; the page
            /tasks/<id>/change/ rendered through Django's test client (the view, git, unidiff,
            Pygments, the template), p50 / p95 of 20 renders after two warm-ups. Aim: p95 <= 300 ms.
(b) json    GET /api/v1/tasks/<id>/diff/?format=json on the same task, p50 / p95 of 20, beside
            `git diff <base> <head>` of the same branches run as a process (the raw baseline, p95):
            aim ratio <= 1.5.
(c) huge    a branch adding 10,000 small files and a 50 MB generated one: the page, median of 3
            (for information: it must answer with summaries, not stall).

Run:  .venv/bin/python bench/diff_bench.py            options: --parts page,json,huge --runs 20
The database (var/diff_bench.sqlite3, or DATABASE_URL) is dropped and recreated; the clones are in a
temporary folder.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness import db, percentile  # noqa: E402 - bench/harness, beside this script
from harness.figures import Recorder, add_option  # noqa: E402

SQLITE_PATH = ROOT / "var" / "diff_bench.sqlite3"
os.environ.setdefault("DATABASE_URL", f"sqlite:///{SQLITE_PATH}")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
os.environ["DEBUG"] = "false"
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"}


def say(text: str) -> None:
    print(text, flush=True)


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return done.stdout


def recreate_database() -> None:
    url = os.environ["DATABASE_URL"]
    if url.startswith("sqlite"):
        for suffix in ("", "-wal", "-shm"):
            Path(str(SQLITE_PATH) + suffix).unlink(missing_ok=True)
        return
    db.recreate_database_url(url)


def source(n: int, lines: int = 120) -> str:
    return "".join(f"def function_{n}_{i}(value):\n    return value * {i}  # step {i}\n" for i in range(lines // 2))


def make_clone(base: Path, name: str) -> Path:
    clone = base / name
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    (clone / "README.md").write_text("# bench\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "Initial commit")
    return clone


def branch_5000(base: Path, task_id: int) -> Path:
    """200 Python files of 120 lines on main; the task's branch changes 12 lines in each, 9 apart
    (12 hunks), and adds one at the end: 25 changed lines a file, 5,000 in all (13 added, 12
    removed a file), with their context lines."""
    clone = make_clone(base, "app")
    for n in range(200):
        (clone / "src" / f"pkg{n % 10}").mkdir(parents=True, exist_ok=True)
        (clone / "src" / f"pkg{n % 10}" / f"module_{n}.py").write_text(source(n))
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "The code")
    git(clone, "checkout", "-q", "-b", f"task-{task_id}")
    for n in range(200):
        path = clone / "src" / f"pkg{n % 10}" / f"module_{n}.py"
        rows = path.read_text().splitlines(keepends=True)
        for k in range(12):
            index = 5 + 9 * k
            rows[index] = rows[index].replace("return value", "return value + 1")
        rows.append(f"LAST = {n}\n")
        path.write_text("".join(rows))
    git(clone, "commit", "-q", "-am", "The task's change")
    git(clone, "checkout", "-q", "main")
    return clone


def branch_huge(base: Path, task_id: int) -> Path:
    clone = make_clone(base, "huge")
    git(clone, "checkout", "-q", "-b", f"task-{task_id}")
    (clone / "gen").mkdir()
    for n in range(10_000):
        (clone / "gen" / f"{n:05d}.txt").write_text(f"generated {n}\n")
    with open(clone / "generated.json", "w") as out:
        for n in range(1_000_000):  # 50 MB
            out.write(f'{{"row": {n:09d}, "value": "{"x" * 21}"}}\n')
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "Generated")
    git(clone, "checkout", "-q", "main")
    return clone


def timed(call, runs: int, cpu: list[float] | None = None) -> list[float]:
    """Wall ms of ``runs`` calls after two warm-ups; ``cpu`` gets each call's CPU ms (this process
    and the git processes it waited for): on a machine shared with other jobs the wall time is
    mostly waiting for a core, the CPU time is the work."""
    call()
    call()
    times = []
    for _ in range(runs):
        before = os.times()
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
        after = os.times()
        if cpu is not None:
            cpu.append(sum(after[i] - before[i] for i in range(4)) * 1000)
    return times


def task_for(clone: Path):
    from board.models import Task
    from workspaces.worktrees.services import repository_register

    repository, _ = repository_register(path=str(clone))
    return Task.objects.create(title=f"Benchmark {clone.name}", repository=repository, status=Task.Status.REVIEW)


def person_client():
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from config.pages import PRODUCT_OWNERS

    user, _ = User.objects.get_or_create(username="bench-po")
    user.groups.add(Group.objects.get_or_create(name=PRODUCT_OWNERS)[0])
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def row(name: str, times: list[float]) -> dict:
    result = {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(percentile(times, 95), 1)}
    say(f"{name:<44} p50 {result['p50_ms']:>8} ms   p95 {result['p95_ms']:>8} ms")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="page,json,huge")
    parser.add_argument("--runs", type=int, default=20)
    add_option(parser)  # --no-record
    args = parser.parse_args()
    parts = args.parts.split(",")
    recorder = Recorder("diff_bench.py", enabled=not args.no_record)
    (ROOT / "var").mkdir(exist_ok=True)
    recreate_database()
    db.django_setup()
    from django.conf import settings
    from django.core.cache import cache

    settings.ALLOWED_HOSTS = ["*"]
    client = person_client()
    with tempfile.TemporaryDirectory(prefix="diff-bench-") as folder:
        base = Path(folder)
        task = task_for(branch_5000(base, task_id=1))
        assert task.pk == 1, "a fresh database: the branch is named for task 1"
        page_url, json_url = f"/tasks/{task.pk}/change/", f"/api/v1/tasks/{task.pk}/diff/?format=json"
        first = client.get(page_url)
        assert first.status_code == 200, first.content[:500]
        body = client.get(json_url).json()
        lines = sum(len(h["lines"]) for f in body["files"] for h in f["hunks"])
        say(f"change: {len(body['files'])} files, {lines} diff lines, page {len(first.content) // 1024} KiB")
        if "page" in parts:
            recorder.start()
            cpu: list[float] = []
            page = row("page /tasks/<id>/change/ (seen before)", timed(lambda: client.get(page_url), args.runs, cpu))
            row("  the same, CPU time", cpu)
            row("page, side by side", timed(lambda: client.get(page_url + "?view=split"), args.runs))
            row("page, first view (nothing cached)", timed(lambda: (cache.clear(), client.get(page_url)), 5))
            recorder.record("review.page_p95", page["p95_ms"])
        if "json" in parts:
            recorder.start()
            clone = Path(task.repository.path)
            head, base_commit = body["head"], body["base"]["commit"]
            raw_cpu: list[float] = []
            raw = row(
                "git diff <base> <head>", timed(lambda: git(clone, "diff", base_commit, head), args.runs, raw_cpu)
            )
            row("  the same, CPU time", raw_cpu)
            # Cold: the change read and parsed (the figure); warm: from the cache (a change read again).
            ours_cpu: list[float] = []
            ours = row(
                "GET /diff/?format=json, cold",
                timed(lambda: (cache.clear(), client.get(json_url)), args.runs, ours_cpu),
            )
            row("  the same, CPU time", ours_cpu)
            row("GET /diff/?format=json, warm", timed(lambda: client.get(json_url), args.runs))
            say(f"{'ratio (cold JSON p95 / git diff p95)':<44} {ours['p95_ms'] / raw['p95_ms']:.2f}")
            recorder.record("review.diff_json_p95", ours["p95_ms"], raw=raw["p95_ms"])
        if "huge" in parts:
            recorder.start()
            huge = task_for(branch_huge(base, task_id=task.pk + 1))
            url = f"/tasks/{huge.pk}/change/"
            times = []
            for _ in range(3):
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200 and b"too large to show" in response.content.lower()
            median = round(statistics.median(times), 1)
            say(f"{'page, 10,000 files and a 50 MB file':<44} median {median} ms, {len(response.content) // 1024} KiB")
            recorder.record("review.huge_page", median)
    say(recorder.note())


if __name__ == "__main__":
    main()
