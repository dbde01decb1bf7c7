"""The task's change as the API's JSON sends it (SPEC §10, ``GET /tasks/{id}/diff/?format=json``).

Its files (each with its hunks and lines: 10,000 small objects for a 5,000-line change) are encoded
once by orjson and cached as those bytes, by the same two heads as the read (runners/task_diff.py):
the answer embeds them as they are (``orjson.Fragment``). Caching the read itself would pickle those
objects on a first view and unpickle them on every later one, each costing more than the encoding
(bench/diff_bench.py). The page and the comment checks read the change as objects (``task_change``).
"""

from dataclasses import dataclass

import orjson
from django.core.cache import cache

from board.models import Task
from config.api.renderers import FastJSONRenderer
from runners.task_diff import (
    CACHE_MAX_BYTES,
    CACHE_SECONDS,
    ChangeIdentity,
    DiffFile,
    cache_key,
    change_read,
    collector_paused,
    task_change_heads,
)


@dataclass
class EncodedChange(ChangeIdentity):
    totals: dict[str, int]  # files, additions, deletions, summarised
    files: orjson.Fragment  # the JSON array of SPEC §10's file objects


def file_json(item: DiffFile) -> dict:
    return {
        "path": item.path,
        "old_path": item.old_path,
        "status": item.status,
        "additions": item.additions,
        "deletions": item.deletions,
        "binary": item.binary,
        "too_large": item.too_large,
        "old_size": item.old_size,
        "new_size": item.new_size,
        "hunks": item.hunks,
    }


def task_change_encoded(*, task: Task) -> EncodedChange:
    path, branch, head, tip = task_change_heads(task=task)
    key = cache_key("task-change-json", path, tip, head)
    cached = cache.get(key)
    if cached is None:
        # The read's objects are gone once encoded: the cyclic collector need not walk them meanwhile.
        with collector_paused():
            read = change_read(path, tip, head)
            files = FastJSONRenderer().render([file_json(item) for item in read.files])
        totals = {
            "files": len(read.files),
            "additions": sum(item.additions for item in read.files),
            "deletions": sum(item.deletions for item in read.files),
            "summarised": sum(1 for item in read.files if item.too_large),
        }
        cached = (read.base, totals, files)
        if read.size <= CACHE_MAX_BYTES:
            cache.set(key, cached, timeout=CACHE_SECONDS)
    base, totals, files = cached
    return EncodedChange(
        task_id=task.pk,
        repository=task.repository.name,
        branch=branch,
        base_branch=task.repository.default_branch,
        base_commit=base,
        head_commit=head,
        totals=totals,
        files=orjson.Fragment(files),
    )
