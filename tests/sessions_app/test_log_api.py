"""GET /api/v1/sessions/{id}/log/?offset=N: the session's log by byte offset, one capped chunk at a time."""

import os
from pathlib import Path

import pytest
from django.conf import settings

from sessions_app.logs import DEFAULT_CHUNK, MAX_CHUNK
from tests.factories import SessionFactory


def _log_path(session) -> Path:
    return Path(settings.LOGS_ROOT) / "orchestrator-sessions" / f"session-{session.pk}" / f"{session.agent.slug}.log"


def _write_log(session, data: bytes) -> Path:
    path = _log_path(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _url(session, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/v1/sessions/{session.pk}/log/" + (f"?{query}" if query else "")


@pytest.mark.django_db
def test_reads_from_the_start_with_the_next_offset(agent_client, session):
    _write_log(session, b"line one\nline two\n")

    response = agent_client.get(_url(session))

    assert response.status_code == 200
    assert response.json() == {
        "offset": 0,
        "next_offset": 18,
        "size": 18,
        "data": "line one\nline two\n",
        "exists": True,
    }


@pytest.mark.django_db
def test_reads_from_an_offset_and_follows_appends(agent_client, session):
    path = _write_log(session, b"line one\n")
    first = agent_client.get(_url(session, offset=5)).json()
    assert first["data"] == "one\n"
    assert first["next_offset"] == 9

    with path.open("ab") as log:
        log.write(b"line two\n")
    second = agent_client.get(_url(session, offset=first["next_offset"])).json()

    assert second == {"offset": 9, "next_offset": 18, "size": 18, "data": "line two\n", "exists": True}
    assert agent_client.get(_url(session, offset=18)).json()["data"] == ""


@pytest.mark.django_db
def test_chunks_are_capped_by_limit_and_default(agent_client, session):
    _write_log(session, b"a" * (DEFAULT_CHUNK + 10))

    default = agent_client.get(_url(session)).json()
    small = agent_client.get(_url(session, offset=3, limit=4)).json()

    assert len(default["data"]) == DEFAULT_CHUNK
    assert default["next_offset"] == DEFAULT_CHUNK
    assert small == {"offset": 3, "next_offset": 7, "size": DEFAULT_CHUNK + 10, "data": "aaaa", "exists": True}


@pytest.mark.django_db
def test_a_chunk_never_ends_inside_a_utf8_character(agent_client, session):
    _write_log(session, "ab€cd".encode())  # € is 3 bytes: offsets 2..4

    cut = agent_client.get(_url(session, limit=4)).json()
    rest = agent_client.get(_url(session, offset=cut["next_offset"])).json()

    assert cut["data"] == "ab"
    assert cut["next_offset"] == 2
    assert rest["data"] == "€cd"


@pytest.mark.django_db
def test_undecodable_bytes_are_replaced(agent_client, session):
    _write_log(session, b"ok \xff\xfe end\n")

    assert agent_client.get(_url(session)).json()["data"] == "ok \ufffd\ufffd end\n"


@pytest.mark.django_db
def test_a_100_mb_log_is_read_from_the_end_without_loading_it(agent_client, session, monkeypatch):
    path = _log_path(session)
    path.parent.mkdir(parents=True)
    size = 100 * 1024 * 1024
    with path.open("wb") as log:
        log.truncate(size - 12)  # sparse: 100 MB on paper, nothing on disk
        log.seek(size - 12)
        log.write(b"last line!!\n")
    reads = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: reads.append(n) or real_pread(fd, n, offset))

    response = agent_client.get(_url(session, offset=size - 12))

    assert response.status_code == 200
    assert response.json() == {
        "offset": size - 12,
        "next_offset": size,
        "size": size,
        "data": "last line!!\n",
        "exists": True,
    }
    assert reads == [12]


@pytest.mark.django_db
def test_no_log_yet_is_an_empty_chunk(agent_client, session):
    response = agent_client.get(_url(session, offset=7))

    assert response.status_code == 200
    assert response.json() == {"offset": 7, "next_offset": 7, "size": 0, "data": "", "exists": False}


@pytest.mark.django_db
def test_an_offset_past_the_end_restarts_at_the_current_end(agent_client, session):
    _write_log(session, b"short\n")

    assert agent_client.get(_url(session, offset=500)).json() == {
        "offset": 500,
        "next_offset": 6,
        "size": 6,
        "data": "",
        "exists": True,
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [
        {"offset": -1},
        {"offset": "abc"},
        {"offset": "1.5"},
        {"offset": 2**63},
        {"offset": "9" * 40},
        {"limit": 0},
        {"limit": MAX_CHUNK + 1},
        {"limit": "x"},
    ],
)
def test_bad_offsets_and_limits_are_a_400(agent_client, session, params):
    _write_log(session, b"data\n")

    response = agent_client.get(_url(session, **params))

    assert response.status_code == 400
    assert "must be" in response.json()["message"]


@pytest.mark.django_db
def test_another_agents_session_is_a_403_and_nothing_changes(other_client, session):
    path = _write_log(session, b"secret\n")

    response = other_client.get(_url(session))

    assert response.status_code == 403
    assert "secret" not in response.content.decode()
    assert path.read_bytes() == b"secret\n"


@pytest.mark.django_db
def test_unknown_session_is_a_404(agent_client):
    response = agent_client.get("/api/v1/sessions/nope/log/")

    assert response.status_code == 404


@pytest.mark.django_db
def test_staff_read_any_session(staff_client, session):
    _write_log(session, b"hello\n")

    assert staff_client.get(_url(session)).json()["data"] == "hello\n"


@pytest.mark.django_db
def test_a_symlinked_log_is_refused_not_followed(agent_client, session, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("do not read\n")
    path = _log_path(session)
    path.parent.mkdir(parents=True)
    path.symlink_to(outside)

    response = agent_client.get(_url(session))

    assert response.status_code == 400
    assert "do not read" not in response.content.decode()


@pytest.mark.django_db
def test_a_synced_session_id_is_its_own_folder(agent_client, agent):
    session = SessionFactory(agent=agent, id="session-1770537842")
    path = Path(settings.LOGS_ROOT) / "orchestrator-sessions" / "session-1770537842" / "claude-1.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"synced\n")

    assert agent_client.get(_url(session)).json()["data"] == "synced\n"
