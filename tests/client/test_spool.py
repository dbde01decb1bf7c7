"""The hook's spool: one writer at a time, and what could not wait for the lock is kept in order."""

import time

import pytest

from switchyard_client.hook.spool import Spool, SpoolBusy


def test_a_busy_spool_sends_the_records_to_overflow_and_the_next_holder_reads_them_in_order(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    with spool.locked(until=time.monotonic() + 1):
        spool.replace([{"n": 1}, {"n": 2}])
        with pytest.raises(SpoolBusy), spool.locked(until=time.monotonic() + 0.05):
            pass  # a second process would wait here, then give up
        spool.overflow([{"n": 3}])
        spool.overflow([{"n": 4}])

    with spool.locked(until=time.monotonic() + 1):
        assert spool.read() == [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]
        spool.replace([{"n": 4}])

    with spool.locked(until=time.monotonic() + 1):
        assert spool.read() == [{"n": 4}]  # overflow files were folded in once
        spool.replace([])
    assert not (tmp_path / "spool.jsonl").exists()


def test_a_torn_last_line_does_not_lose_the_others(tmp_path):
    path = tmp_path / "spool.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}\n{"n": ')

    assert Spool(path).read() == [{"n": 1}, {"n": 2}]
