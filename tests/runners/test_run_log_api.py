"""POST /api/v1/runs/{id}/log/?offset=N&attempt=A: a run's output into its session log, idempotent by offset."""

import json
import os
from pathlib import Path

import pytest

from config.actors import SYSTEM
from config.api.errors import LEASE_LOST, DomainError
from runners.models import Run
from runners.services import run_cancel, run_transition
from tests.runners.runner_clients import client_with_key, next_runs, post_log, report, take_and_start, world_state

pytestmark = pytest.mark.django_db
MIB = 1024 * 1024


@pytest.fixture
def started(runner_client, queue_run):
    run = queue_run()
    body = take_and_start(runner_client, run)
    return Run.objects.select_related("session__agent").get(pk=run.pk), body


def _log_file(settings, run: Run) -> Path:
    return Path(settings.LOGS_ROOT) / "orchestrator-sessions" / f"session-{run.session_id}" / "demo-at-build-1.log"


def test_chunks_land_in_the_session_log_that_the_log_api_reads(runner_client, started, settings):
    run, body = started

    first = post_log(runner_client, run.pk, b"line one\n", offset=0)
    second = post_log(runner_client, run.pk, "line two é\n".encode(), offset=9)

    assert (first.status_code, first.json()) == (200, {"offset": 9})
    assert (second.status_code, second.json()) == (200, {"offset": 21})
    assert _log_file(settings, run).read_bytes() == "line one\nline two é\n".encode()
    # the session's own log API (read with the per-run key) shows it
    shown = client_with_key(body["agent_key"]).get(f"/api/v1/sessions/{run.session_id}/log/").json()
    assert shown["data"] == "line one\nline two é\n"


def test_a_resent_chunk_is_not_appended_twice(runner_client, started, settings):
    run, _ = started
    post_log(runner_client, run.pk, b"abcdef", offset=0)

    again = post_log(runner_client, run.pk, b"abcdef", offset=0)
    part = post_log(runner_client, run.pk, b"cd", offset=2)

    assert again.json() == part.json() == {"offset": 6}
    assert _log_file(settings, run).read_bytes() == b"abcdef"


def test_an_overlapping_chunk_adds_only_the_bytes_past_the_end(runner_client, started, settings):
    run, _ = started
    post_log(runner_client, run.pk, b"abcdef", offset=0)

    response = post_log(runner_client, run.pk, b"defghi", offset=3)

    assert response.json() == {"offset": 9}
    assert _log_file(settings, run).read_bytes() == b"abcdefghi"


def test_a_gap_is_409_with_the_offset_to_resend_from(runner_client, started, settings):
    run, _ = started
    post_log(runner_client, run.pk, b"abc", offset=0)

    response = post_log(runner_client, run.pk, b"xyz", offset=10)

    assert response.status_code == 409
    assert response.json()["offset"] == 3
    assert _log_file(settings, run).read_bytes() == b"abc"


def test_an_empty_chunk_answers_the_size(runner_client, started):
    run, _ = started
    post_log(runner_client, run.pk, b"abc", offset=0)

    assert post_log(runner_client, run.pk, b"", offset=3).json() == {"offset": 3}


def test_the_last_chunk_is_taken_after_the_run_ended(runner_client, started, settings):
    run, _ = started
    report(runner_client, run.pk, "running", pid=1)
    post_log(runner_client, run.pk, b"working\n", offset=0)
    report(runner_client, run.pk, "failed", exit_code=1, error="boom")

    response = post_log(runner_client, run.pk, b"boom\n", offset=8)

    assert response.json() == {"offset": 13}
    assert _log_file(settings, run).read_bytes() == b"working\nboom\n"


def test_a_lost_run_takes_nothing_more(runner_client, started, settings):
    run, _ = started
    post_log(runner_client, run.pk, b"abc", offset=0)
    run_transition(actor=SYSTEM, run=run, to=Run.Status.LOST)

    response = post_log(runner_client, run.pk, b"def", offset=3)

    assert (response.status_code, response.json()["code"]) == (409, LEASE_LOST)
    assert _log_file(settings, run).read_bytes() == b"abc"


def test_a_stale_attempt_is_409_lease_lost(runner_client, started, settings):
    run, _ = started
    report(runner_client, run.pk, "starting", attempt=1)  # a restart: attempt 2

    response = post_log(runner_client, run.pk, b"old", offset=0, attempt=1)

    assert (response.status_code, response.json()["code"]) == (409, LEASE_LOST)
    assert not _log_file(settings, run).exists()


def test_a_run_without_a_session_yet_is_409(runner_client, queue_run):
    run = queue_run()
    next_runs(runner_client)

    response = post_log(runner_client, run.pk, b"early", offset=0)

    assert response.status_code == 409


def test_another_runner_and_other_keys_are_refused_and_nothing_is_written(
    runner_client, other_runner_client, started, agent_client, staff_client, settings
):
    run, body = started
    before = world_state()

    for client in (other_runner_client, agent_client, staff_client, client_with_key(body["agent_key"])):
        response = post_log(client, run.pk, b"intruder", offset=0)
        assert response.status_code == 403
        assert "message" in response.json()
    assert world_state() == before
    assert not _log_file(settings, run).exists()


@pytest.mark.parametrize(
    "query", ["", "?offset=0", "?attempt=1", "?offset=-1&attempt=1", "?offset=x&attempt=1", "?offset=0&attempt=0"]
)
def test_bad_query_parameters_are_400_json(runner_client, started, settings, query):
    run, _ = started

    response = runner_client.generic(
        "POST", f"/api/v1/runs/{run.pk}/log/{query}", b"abc", content_type="application/octet-stream"
    )

    assert response.status_code == 400
    assert "message" in response.json()
    assert not _log_file(settings, run).exists()


def test_a_large_chunk_is_stored_whole_and_a_resend_overlapping_it_adds_only_the_rest(runner_client, started, settings):
    run, _ = started
    data = os.urandom(5 * MIB + 3)  # several of the 1 MiB pieces the body is read in

    first = post_log(runner_client, run.pk, data[: 3 * MIB], offset=0)
    resent = post_log(runner_client, run.pk, data[MIB:], offset=MIB)  # overlaps 2 MiB already stored

    assert first.json() == {"offset": 3 * MIB}
    assert resent.json() == {"offset": len(data)}
    assert _log_file(settings, run).read_bytes() == data


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="the early writeback is Linux's posix_fadvise")
def test_a_large_chunk_goes_to_the_disk_as_it_comes_and_is_fsynced_once_before_the_answer(
    runner_client, started, settings, monkeypatch
):
    from runners import log_shipping

    run, _ = started
    post_log(runner_client, run.pk, b"head:", offset=0)
    monkeypatch.setattr(log_shipping, "WRITEBACK_EVERY", 2 * MIB)
    calls = []
    fsync = os.fsync
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, start, length, advice: calls.append((start, length, advice)))
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), fsync(fd))[1])
    data = os.urandom(5 * MIB)  # five 1 MiB pieces: written back after the second and the fourth

    response = post_log(runner_client, run.pk, data, offset=5)

    dontneed = os.POSIX_FADV_DONTNEED
    assert calls == [(5, 2 * MIB, dontneed), (5 + 2 * MIB, 2 * MIB, dontneed), "fsync"]
    assert response.json() == {"offset": 5 + len(data)}
    assert _log_file(settings, run).read_bytes() == b"head:" + data


def test_the_limit_is_64_mib_by_default():
    from config.settings import base

    assert base.RUNNER_LOG_CHUNK_MAX_BYTES == 64 * MIB or "RUNNER_LOG_CHUNK_MAX_BYTES" in os.environ


def test_a_chunk_over_the_limit_is_413_and_nothing_is_stored(runner_client, started, settings):
    run, _ = started
    settings.RUNNER_LOG_CHUNK_MAX_BYTES = 1000

    response = post_log(runner_client, run.pk, b"x" * 1001, offset=0)
    at_the_limit = post_log(runner_client, run.pk, b"y" * 1000, offset=0)

    assert response.status_code == 413
    assert at_the_limit.json() == {"offset": 1000}
    assert _log_file(settings, run).read_bytes() == b"y" * 1000


def test_a_body_cut_after_some_pieces_keeps_them_unacknowledged_and_the_resend_completes(
    runner_client, started, settings
):
    from runners.log_shipping import run_log_append

    run, _ = started
    post_log(runner_client, run.pk, b"head:", offset=0)

    def cut():  # as the ASGI body does when its client goes away after two pieces
        yield b"one,"
        yield b"two,"
        raise DomainError("The client went away before the whole body arrived.")

    with pytest.raises(DomainError):
        run_log_append(runner=run.runner, run=run, attempt=1, offset=5, chunks=cut())

    assert _log_file(settings, run).read_bytes() == b"head:one,two,"  # a prefix, never answered
    resent = post_log(runner_client, run.pk, b"one,two,three", offset=5)
    assert resent.json() == {"offset": 18}
    assert _log_file(settings, run).read_bytes() == b"head:one,two,three"


# --- through the ASGI app production serves: the body streamed from the socket -----------------------
@pytest.fixture
def live_started(transactional_db, runner_and_key, queue_run):
    """A started run, committed (the ASGI app answers from its own thread), and the runner's key."""
    from runners.models import Runner
    from tests.runners.runner_clients import client_with_key

    runner, issued = runner_and_key
    Runner.objects.filter(pk=runner.pk).update(providers=["demo", "claude"], status=Runner.Status.ONLINE)
    run = queue_run()
    take_and_start(client_with_key(issued.key), run)
    return Run.objects.select_related("session__agent").get(pk=run.pk), issued.key


def _asgi_log(run, key, chunks, *, offset, **kwargs):
    from tests.config.test_streamed_upload import _request

    query = f"offset={offset}&attempt=1".encode()
    status, body = _request("POST", f"/api/v1/runs/{run.pk}/log/", key, chunks, query=query, **kwargs)
    return status, json.loads(body)


def test_a_streamed_body_lands_whole_without_spooling(live_started, settings, monkeypatch):
    import tempfile

    from django.core.handlers import asgi as django_asgi

    spooled = []
    real = tempfile.SpooledTemporaryFile
    monkeypatch.setattr(
        django_asgi.tempfile, "SpooledTemporaryFile", lambda *a, **k: spooled.append(a) or real(*a, **k)
    )
    run, key = live_started
    chunks = [bytes([65 + i]) * 700_000 for i in range(5)]

    status, body = _asgi_log(run, key, chunks, offset=0)

    assert (status, body) == (200, {"offset": 3_500_000})
    assert _log_file(settings, run).read_bytes() == b"".join(chunks)
    assert spooled == []


def test_a_client_gone_mid_body_leaves_at_most_a_prefix_that_the_resend_completes(live_started, settings):
    run, key = live_started
    data = os.urandom(3 * 600_000)
    chunks = [data[:600_000], data[600_000:1_200_000], data[1_200_000:]]

    status, _ = _asgi_log(run, key, chunks, offset=0, disconnect_after=2)

    assert status == 400  # no answer reaches the client gone; nothing was acknowledged
    kept = _log_file(settings, run).read_bytes() if _log_file(settings, run).exists() else b""
    assert len(kept) <= 1_200_000 and data.startswith(kept)
    # The runner still has offset 0: it sends everything again, and the bytes kept are skipped.
    assert _asgi_log(run, key, chunks, offset=0) == (200, {"offset": len(data)})
    assert _log_file(settings, run).read_bytes() == data


def test_a_chunked_body_over_the_limit_is_413(live_started, settings):
    run, key = live_started
    settings.RUNNER_LOG_CHUNK_MAX_BYTES = 1_000_000
    data = os.urandom(1_500_000)

    status, body = _asgi_log(run, key, [data[:700_000], data[700_000:]], offset=0, declare_length=False)
    retried = _asgi_log(run, key, [data[:1_000_000]], offset=0, declare_length=False)

    assert status == 413 and "at most 1000000 bytes" in body["message"]
    assert retried == (200, {"offset": 1_000_000})
    assert _log_file(settings, run).read_bytes() == data[:1_000_000]


def test_a_cancelled_run_takes_its_last_chunk(runner_client, started, person, settings):
    run, _ = started
    run_cancel(actor=person, run=run)
    report(runner_client, run.pk, "cancelled")

    assert post_log(runner_client, run.pk, b"bye\n", offset=0).json() == {"offset": 4}
