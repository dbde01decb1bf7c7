#!/usr/bin/env python
"""Archive and restore of a 1 GB workspace, against `tar --zstd` on the same folder.

One run: a workspace folder of about --size-mb (default 1024) MB in a few thousand files,
half compressible text (log and note lines from a word list) and half random bytes, with
nested folders and a few symlinks. Then, --repeat times, interleaved so that load on the
machine hits both alike:

  tar-c     tar --zstd -cf out.tar.zst   (or tar -I zstd when --zstd is missing)
  archive   workspaces.archive.services.workspace_archive: stream the tar and sha256 every file, fsync,
            rename, re-read and verify every member's sha256 and the archive's, check the
            folder is unchanged; then (timed apart, tar does not do it) delete the folder
  tar-x     tar --zstd -xf out.tar.zst
  restore   workspaces.archive.restore.workspace_restore: validate the manifest, extract into a
            temporary folder checking every member and sha256, fsync every file, rename

Ratios are tar time / our time (1.0 = as fast as tar; the aim is >= 0.8), from the medians
of the repeats and, since a shared machine adds noise only ever upwards, from the best times.
`sync` runs (untimed) before each step so that one step's dirty pages do not land on the
next. Our archive is synced to disk before it is trusted (the folder goes next) and our
restore syncs every file before it reports, so "tar + sync" rows are shown as well.
The service runs with the real settings against a throwaway SQLite database in --workdir.

Run: .venv/bin/python bench/archive_bench.py            (about 2 minutes and 4 GB of disk)
     .venv/bin/python bench/archive_bench.py --help
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import RESULTS_DIR, ROOT, report, say, stamp
from harness.db import django_setup
from harness.figures import Recorder, add_option

AIM = 0.8


# --- The workspace ------------------------------------------------------------------------------


def make_workspace(folder: Path, *, size_mb: int, seed: int) -> dict:
    """About ``size_mb`` MB: half text, half random bytes, sizes spread like real work products."""
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 11))) for _ in range(6000)]
    pool = _text_pool(rng, words, 48 * 1024 * 1024)
    target = size_mb * 1024 * 1024
    written = files = 0
    text_bytes = 0
    for sub in ("search_results", "work_products", "workbench_activity", "media"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    next_report = target // 10
    while written < target:
        text = text_bytes <= written // 2
        size = min(int(rng.lognormvariate(11.0 if text else 11.8, 1.5)), 24 * 1024 * 1024, target - written + 1)
        sub = folder / rng.choice(("work_products", "search_results", "workbench_activity", "media"))
        sub = sub / f"batch-{files % 37:02d}" / f"part-{files % 5}"
        sub.mkdir(parents=True, exist_ok=True)
        if text:
            start = rng.randrange(0, len(pool) - size - 1)
            data = pool[start : start + size]
            name = f"notes-{files:05d}.{rng.choice(('md', 'txt', 'log', 'json'))}"
            text_bytes += size
        else:
            data = os.urandom(size)
            name = f"blob-{files:05d}.{rng.choice(('png', 'bin', 'pdf', 'zip'))}"
        (sub / name).write_bytes(data)
        written += size
        files += 1
        if written >= next_report:
            say(f"  … {files} files, {written / 1e6:,.0f} MB")
            next_report += target // 10
    os.symlink("work_products", folder / "latest")
    os.symlink("../../elsewhere/outside.txt", folder / "work_products" / "link-out")
    return {"files": files, "bytes": written, "text_bytes": text_bytes}


def _text_pool(rng: random.Random, words: list[str], size: int) -> bytes:
    lines = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.4:
            line = f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} INFO "
        elif kind < 0.6:
            line = f'{{"id": {rng.randint(1, 10**6)}, "status": "{rng.choice(words)}", "text": "'
        else:
            line = "- "
        line += " ".join(rng.choices(words, k=rng.randint(5, 18))) + "\n"
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()[:size]


# --- tar ----------------------------------------------------------------------------------------


def tar_flags() -> list[str]:
    """`tar --zstd` if this tar has it, else `tar -I zstd`."""
    with tempfile.TemporaryDirectory() as scratch:
        probe = Path(scratch) / "probe"
        probe.mkdir()
        (probe / "a").write_text("a")
        for flags in (["--zstd"], ["-I", "zstd"]):
            done = subprocess.run(
                ["tar", *flags, "-cf", str(Path(scratch) / "p.tar.zst"), "-C", scratch, "probe"],
                capture_output=True,
                check=False,
            )
            if done.returncode == 0:
                return flags
    raise SystemExit("Neither `tar --zstd` nor `tar -I zstd` works here: install zstd (apt-get install -y zstd).")


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, tar and its zstd child) of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


class OwnClock:
    """Wall and CPU seconds (every thread of this process) of a block."""

    def __enter__(self) -> OwnClock:
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._started
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu = (usage.ru_utime - self._usage.ru_utime) + (usage.ru_stime - self._usage.ru_stime)


def sync() -> None:
    os.sync()


# --- Ours, through the services ----------------------------------------------------------------


def setup_django(workdir: Path) -> None:
    django_setup(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "WORKSPACE_ROOT": str(workdir / "workspaces"),
            "ARCHIVE_ROOT": str(workdir / "archives"),
            "DEBUG": "false",
        }
    )


def ours_archive(folder: Path) -> dict:
    """The archive service, end to end; the folder deletion (which tar does not do) is timed
    apart by wrapping workspaces.archive.services.folder_remove, so it can be left out of the ratio."""
    from workspaces.archive import services as archival
    from workspaces.models import Workspace

    workspace = Workspace.objects.create(kind=Workspace.Kind.SESSION, root_path=str(folder))
    deletion = {}
    real_remove = archival.folder_remove

    def timed_remove(*args, **kwargs):
        with OwnClock() as clock:
            real_remove(*args, **kwargs)
        deletion.update(wall=clock.wall, cpu=clock.cpu)

    archival.folder_remove = timed_remove
    try:
        with OwnClock() as clock:
            outcome = archival.workspace_archive(workspace_id=workspace.pk)
    finally:
        archival.folder_remove = real_remove
    if outcome.outcome != "archived":
        raise SystemExit(f"archive failed: {outcome}")
    return {
        "workspace_id": workspace.pk,
        "size": outcome.size,
        "wall": clock.wall - deletion["wall"],
        "cpu": clock.cpu - deletion["cpu"],
        "end_to_end": clock.wall,
        "delete": deletion["wall"],
    }


def ours_restore(workspace_id: int) -> tuple[float, float]:
    from workspaces.archive.restore import workspace_restore

    with OwnClock() as clock:
        outcome = workspace_restore(workspace_id=workspace_id)
    if outcome.outcome != "restored":
        raise SystemExit(f"restore failed: {outcome}")
    return clock.wall, clock.cpu


def same_tree(left: Path, right: Path) -> bool:
    done = subprocess.run(["diff", "-r", "--no-dereference", str(left), str(right)], capture_output=True, check=False)
    return done.returncode == 0


# --- Run ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="Workspace size in MB (default 1024).")
    parser.add_argument("--repeat", type=int, default=3, help="Timed rounds, interleaved (default 3).")
    parser.add_argument("--workdir", type=Path, help="Where to put the folders (default: a temporary folder).")
    parser.add_argument(
        "--level", type=int, help="zstd level for our archive (default: workspaces.archive.format.ZSTD_LEVEL)."
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="Keep the work folder.")
    add_option(parser)  # --no-record
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="archive-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        run(args, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args, workdir: Path) -> None:
    flags = tar_flags()
    say(f"tar: {' '.join(['tar', *flags])}; work folder {workdir}")
    setup_django(workdir)
    from django.conf import settings

    from workspaces.archive import format as archive_format

    if args.level is not None:
        archive_format.ZSTD_LEVEL = args.level
    say(f"ours: zstd level {archive_format.ZSTD_LEVEL}, {archive_format.ZSTD_THREADS} compression thread(s)")

    source = workdir / "source" / "workspace"
    say(f"making a {args.size_mb} MB workspace")
    shape = make_workspace(source, size_mb=args.size_mb, seed=args.seed)
    say(f"  {shape['files']} files, {shape['bytes'] / 1e6:,.0f} MB ({shape['text_bytes'] / 1e6:,.0f} MB text)")

    times: dict[str, list[float]] = {
        name: []
        for name in (
            "tar-c",
            "tar-c+sync",
            "archive",
            "archive-end-to-end",
            "delete",
            "tar-x",
            "tar-x+sync",
            "restore",
            "cpu:tar-c",
            "cpu:archive",
            "cpu:tar-x",
            "cpu:restore",
        )
    }
    sizes = {}
    recorder = Recorder("archive_bench.py", enabled=not args.no_record)
    for round_number in range(1, args.repeat + 1):
        say(f"round {round_number}/{args.repeat} (load {os.getloadavg()[0]:.1f})")
        tarball = workdir / "tar" / "workspace.tar.zst"
        tarball.parent.mkdir(exist_ok=True)
        tarball.unlink(missing_ok=True)
        sync()
        wall, cpu = timed(["tar", *flags, "-cf", str(tarball), "-C", str(source.parent), source.name])
        started = time.perf_counter()
        sync()
        times["tar-c"].append(wall)
        times["tar-c+sync"].append(wall + time.perf_counter() - started)
        times["cpu:tar-c"].append(cpu)
        sizes["tar"] = tarball.stat().st_size
        say(f"  tar-c    {wall:6.2f}s (cpu {cpu:.2f}s; {times['tar-c+sync'][-1]:.2f}s with sync)")

        copy = Path(settings.WORKSPACE_ROOT) / f"bench-{round_number}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy, symlinks=True)
        sync()
        ours = ours_archive(copy)
        sizes["ours"] = ours["size"]
        times["archive"].append(ours["wall"])
        times["cpu:archive"].append(ours["cpu"])
        times["archive-end-to-end"].append(ours["end_to_end"])
        times["delete"].append(ours["delete"])
        say(
            f"  archive  {ours['wall']:6.2f}s (cpu {ours['cpu']:.2f}s) written, synced, re-read, verified; "
            f"+ {ours['delete']:.2f}s deleting the folder"
        )

        extracted = workdir / "tar-x"
        shutil.rmtree(extracted, ignore_errors=True)
        extracted.mkdir()
        sync()
        wall, cpu = timed(["tar", *flags, "-xf", str(tarball), "-C", str(extracted)])
        started = time.perf_counter()
        sync()
        times["tar-x"].append(wall)
        times["cpu:tar-x"].append(cpu)
        times["tar-x+sync"].append(wall + time.perf_counter() - started)
        say(f"  tar-x    {wall:6.2f}s (cpu {cpu:.2f}s; {times['tar-x+sync'][-1]:.2f}s with sync)")
        shutil.rmtree(extracted)

        sync()
        wall, cpu = ours_restore(ours["workspace_id"])
        times["restore"].append(wall)
        times["cpu:restore"].append(cpu)
        say(f"  restore  {wall:6.2f}s (cpu {cpu:.2f}s) verified, synced, in place")
        if round_number == 1 and not same_tree(source, copy):
            raise SystemExit("the restored folder differs from the source")
        shutil.rmtree(copy)

    median = {name: statistics.median(values) for name, values in times.items()}
    best = {name: min(values) for name, values in times.items()}
    pairs = {
        "archive": ("tar-c", "archive"),
        "archive_end_to_end": ("tar-c", "archive-end-to-end"),
        "archive_vs_tar_c_sync": ("tar-c+sync", "archive"),
        "restore": ("tar-x", "restore"),
        "restore_vs_tar_x_sync": ("tar-x+sync", "restore"),
        "cpu_archive": ("cpu:tar-c", "cpu:archive"),
        "cpu_restore": ("cpu:tar-x", "cpu:restore"),
    }
    ratios = {name: median[tar] / median[ours] for name, (tar, ours) in pairs.items()}
    best_ratios = {name: best[tar] / best[ours] for name, (tar, ours) in pairs.items()}
    print()
    print(f"{args.repeat} rounds; ratio = tar / ours, of the medians and of the best times (aim >= {AIM})")
    print(f"{'':<32}{'tar (s)':>9}{'ours (s)':>10}{'ratio':>8}{'best':>7}  pass")
    rows = (
        ("archive + verify", "archive", True),
        ("restore + verify", "restore", True),
        ("archive vs tar -c + sync", "archive_vs_tar_c_sync", False),
        ("archive incl. folder deletion", "archive_end_to_end", False),
        ("restore vs tar -x + sync", "restore_vs_tar_x_sync", False),
        ("archive, CPU seconds", "cpu_archive", False),
        ("restore, CPU seconds", "cpu_restore", False),
    )
    for label, name, judged in rows:
        tar, ours = pairs[name]
        verdict = ("yes" if ratios[name] >= AIM else "NO") if judged else ""
        print(
            f"{label:<32}{median[tar]:>9.2f}{median[ours]:>10.2f}{ratios[name]:>8.2f}{best_ratios[name]:>7.2f}  "
            f"{verdict}"
        )
    print(f"compressed: tar {sizes['tar'] / 1e6:,.1f} MB, ours {sizes['ours'] / 1e6:,.1f} MB")

    when = stamp()
    body = {
        "when": when,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "tar": ["tar", *flags],
        "our_zstd_level": archive_format.ZSTD_LEVEL,
        "workspace": shape,
        "times": times,
        "median": median,
        "best": best,
        "ratios": ratios,
        "best_ratios": best_ratios,
        "compressed_bytes": sizes,
    }
    path = report.write_json(RESULTS_DIR / f"archive-{when}.json", body)
    say(f"written {path.relative_to(ROOT)}")
    mb = shape["bytes"] / 1e6  # as MB/s, so that ours / raw is tar's time / ours, the ratio above
    recorder.record("archive.archive", mb / median["archive"], raw=mb / median["tar-c"])
    recorder.record("archive.restore", mb / median["restore"], raw=mb / median["tar-x"])
    say(recorder.note())


if __name__ == "__main__":
    main()
