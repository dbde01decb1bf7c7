"""bench/harness/figures.py: one entry per figure, replaced on each record, its pass computed from
the aim, the file written whole or not at all."""

import datetime as dt
import json
import os

import pytest
from harness import figures
from harness.catalogue import Aim, Spec

CATALOGUE = {
    "t.latency": Spec("t_bench.py", "a latency", "ms", "lower", "none: an absolute aim", Aim("<=", 50, "ms")),
    "t.speed": Spec("t_bench.py", "a speed", "MB/s", "higher", "cp, MB/s", Aim(">=", 0.8, on="ratio")),
    "t.info": Spec("t_bench.py", "a figure for information", "µs", "lower", "json.dumps, µs", None),
}
LOAD = [0.5, 0.4, 0.3]


@pytest.fixture
def catalogue(monkeypatch):
    monkeypatch.setattr(figures, "CATALOGUE", CATALOGUE)
    monkeypatch.delenv(figures.NO_RECORD_ENV, raising=False)


def put(path, figure_id, **fields):
    fields.setdefault("load_start", LOAD)
    fields.setdefault("commit_id", "abc1234")
    return figures.record(figure_id, path, path.parent, **fields)


def test_an_entry_replaces_the_figures_last_one_and_leaves_the_others(tmp_path, catalogue):
    # given two figures recorded
    path = tmp_path / "figures.json"
    put(path, "t.latency", value=60.0)
    put(path, "t.speed", value=400.0, raw=500.0)
    # when the first is recorded again
    put(path, "t.latency", value=42.0, now=dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC))
    # then the file holds one entry each, the new one in place of the old
    body = json.loads(path.read_text())
    assert body["schema"] == 1
    assert sorted(body["figures"]) == ["t.latency", "t.speed"]
    latency = body["figures"]["t.latency"]
    assert (latency["value"], latency["passed"], latency["date"]) == (42.0, True, "2026-11-27T10:00:00Z")
    assert latency["raw"] == {"what": "none: an absolute aim", "value": None}
    assert latency["ratio"] is None
    assert body["figures"]["t.speed"]["value"] == 400.0
    # and the file is written with sorted keys, so reruns diff line by line
    assert path.read_text() == json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize(
    ("figure_id", "fields", "passed", "ratio"),
    [
        ("t.latency", {"value": 50.0}, True, None),
        ("t.latency", {"value": 50.1}, False, None),
        ("t.latency", {"value": 10.0, "conditions": {"no failed requests": False}}, False, None),
        ("t.latency", {"value": None}, False, None),
        ("t.speed", {"value": 400.0, "raw": 500.0}, True, 0.8),
        ("t.speed", {"value": 300.0, "raw": 500.0}, False, 0.6),
        ("t.speed", {"value": 300.0}, None, None),
        ("t.info", {"value": 5.1, "raw": 1.7}, None, 3.0),
    ],
)
def test_pass_is_computed_from_the_aim_and_the_conditions(tmp_path, catalogue, figure_id, fields, passed, ratio):
    written = put(tmp_path / "figures.json", figure_id, **fields)
    assert (written["passed"], written["ratio"]) == (passed, ratio)


def test_an_entry_says_what_was_measured_and_where(tmp_path, catalogue):
    written = put(tmp_path / "figures.json", "t.speed", value=400.0, raw=500.0, load_end=[0.7, 0.5, 0.3])
    assert written["aim"] == {"text": ">= 0.8 of raw", "on": "ratio", "op": ">=", "limit": 0.8}
    assert written["raw"] == {"what": "cp, MB/s", "value": 500.0}
    assert (written["better"], written["unit"], written["commit"]) == ("higher", "MB/s", "abc1234")
    assert written["load"] == {"start": LOAD, "end": [0.7, 0.5, 0.3], "nproc": len(os.sched_getaffinity(0))}


def test_a_raw_value_for_a_figure_without_a_baseline_is_refused(tmp_path, catalogue):
    path = tmp_path / "figures.json"
    with pytest.raises(ValueError):
        put(path, "t.latency", value=42.0, raw=1.0)
    assert not path.exists()


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary_file(tmp_path, catalogue, monkeypatch):
    # given a file with one entry, in a folder of its own
    path = tmp_path / "bench" / "figures.json"
    path.parent.mkdir()
    put(path, "t.latency", value=42.0)
    before = path.read_text()

    # when the write fails halfway (the disk fills, say)
    def broken_fsync(fd):
        raise OSError("no space left on device")

    monkeypatch.setattr(figures.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        put(path, "t.speed", value=400.0, raw=500.0)
    # then the file is the old one, and nothing is left beside it but the lock
    assert path.read_text() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [".figures.lock", "figures.json"]


def test_a_recorder_records_only_its_own_benchmarks_figures_and_not_when_told_not_to(tmp_path, catalogue, monkeypatch):
    path = tmp_path / "figures.json"
    monkeypatch.setattr(figures, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(figures, "commit", lambda: "abc1234")
    mine = figures.Recorder("t_bench.py", path=path)
    other = figures.Recorder("other_bench.py", path=path)
    assert other.record("t.latency", 42.0) is None
    assert not path.exists()
    monkeypatch.setenv(figures.NO_RECORD_ENV, "1")
    assert figures.Recorder("t_bench.py", path=path).record("t.latency", 42.0) is None
    assert not path.exists()
    assert mine.record("t.latency", 42.0)["value"] == 42.0
    assert list(json.loads(path.read_text())["figures"]) == ["t.latency"]


def test_the_commit_is_head_and_dirty_only_for_changed_code(monkeypatch):
    calls = []

    def git(*argv):
        calls.append(argv)
        return "abc1234" if argv[0] == "rev-parse" else " M bench/run.py"

    monkeypatch.setattr(figures, "_git", git)
    assert figures.commit() == "abc1234+dirty"
    # the files a run itself rewrites are not looked at
    assert ":!bench/figures.json" in calls[1] and ":!bench/README.md" in calls[1]
