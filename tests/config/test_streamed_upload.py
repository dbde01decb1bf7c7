"""Uploads are streamed from the ASGI server into the workspace, never spooled first, and
downloads go back out chunk by chunk, never read whole into memory.

These go through config.asgi.application, the app production serves, with Django's handler
replaced for the upload route only (config/asgi_stream.py).
"""

import hashlib
import os
import tempfile

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.handlers import asgi as django_asgi

from config.asgi import application
from workspaces.models import Artifact


async def _arequest(
    method: str,
    path: str,
    key: str,
    chunks: list[bytes],
    *,
    disconnect_after: int | None = None,
    content_type: bytes = b"application/octet-stream",
    headers: list[tuple[bytes, bytes]] = (),
    messages: list | None = None,
    query: bytes = b"",
    declare_length: bool = True,
):
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", content_type),
            *([(b"content-length", str(sum(len(c) for c in chunks)).encode())] if declare_length else []),
            *headers,
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }
    communicator = ApplicationCommunicator(application, scope)
    for i, chunk in enumerate(chunks):
        if disconnect_after is not None and i == disconnect_after:
            await communicator.send_input({"type": "http.disconnect"})
            break
        await communicator.send_input({"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1})
    start = await communicator.receive_output(timeout=20)
    body = b""
    while True:
        message = await communicator.receive_output(timeout=20)
        if messages is not None:
            messages.append(message)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await communicator.wait(timeout=5)
    return start["status"], body


def _request(*args, **kwargs):
    return async_to_sync(_arequest)(*args, **kwargs)


@pytest.fixture
def session_id(transactional_db, agent_client):
    response = agent_client.post("/api/v1/sessions/", {"intent": "upload"}, format="json")
    assert response.status_code == 201
    return response.json()["id"]


@pytest.fixture
def no_spooling(monkeypatch):
    """Record every body Django's handler spools to a temporary file."""
    spooled = []
    real = tempfile.SpooledTemporaryFile

    def spy(*args, **kwargs):
        spooled.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(django_asgi.tempfile, "SpooledTemporaryFile", spy)
    return spooled


def test_a_multi_chunk_upload_lands_whole_without_spooling(session_id, agent_client, no_spooling):
    chunks = [bytes([i]) * 700_000 for i in range(5)]  # 3.5 MB in five messages, over READ_AHEAD

    status, body = _request(
        "PUT", f"/api/v1/sessions/{session_id}/files/work_products/big.bin", agent_client.key, chunks
    )

    assert status == 201, body
    stored = b"".join(chunks)
    artifact = Artifact.objects.get(path="work_products/big.bin")
    assert artifact.sha256 == hashlib.sha256(stored).hexdigest()
    assert artifact.size == len(stored)
    assert no_spooling == []


def test_other_requests_are_still_spooled(session_id, agent_client, no_spooling):
    status, _ = _request(
        "POST",
        f"/api/v1/sessions/{session_id}/events/",
        agent_client.key,
        [b'{"type": "log"}'],
        content_type=b"application/json",
    )
    assert status == 201
    assert len(no_spooling) == 1


def test_a_client_that_goes_away_mid_body_leaves_nothing(session_id, agent_client, file_roots):
    chunks = [b"x" * 600_000, b"y" * 600_000, b"z" * 600_000]
    before = sorted(p for p in file_roots["WORKSPACE_ROOT"].rglob("*"))

    status, body = _request(
        "PUT",
        f"/api/v1/sessions/{session_id}/files/work_products/cut.bin",
        agent_client.key,
        chunks,
        disconnect_after=2,
    )

    assert status == 400
    assert b"went away before the whole body arrived" in body
    assert not Artifact.objects.filter(path="work_products/cut.bin").exists()
    assert sorted(p for p in file_roots["WORKSPACE_ROOT"].rglob("*")) == before


def test_another_agents_upload_is_refused_and_nothing_is_written(session_id, other_client, file_roots):
    before = sorted(p for p in file_roots["WORKSPACE_ROOT"].rglob("*"))

    status, _ = _request(
        "PUT", f"/api/v1/sessions/{session_id}/files/work_products/x.bin", other_client.key, [b"a" * 10]
    )

    assert status == 403
    assert not Artifact.objects.filter(path="work_products/x.bin").exists()
    assert sorted(p for p in file_roots["WORKSPACE_ROOT"].rglob("*")) == before


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open descriptors in /proc")
def test_a_download_goes_out_chunk_by_chunk_and_closes_its_file(session_id, agent_client, recwarn):
    # given a 3.5 MB file (four 1 MB reads)
    stored = b"".join(bytes([i]) * 700_000 for i in range(5))
    url = f"/api/v1/sessions/{session_id}/files/work_products/big.bin"
    assert _request("PUT", url, agent_client.key, [stored])[0] == 201
    fds = _open_fds()

    # when it is downloaded through the ASGI app
    messages = []
    status, body = _request("GET", url, agent_client.key, [b""], messages=messages)

    # then it arrives whole, in several messages, and Django did not have to read a sync
    # iterator whole into a list first (which it warns about)
    assert status == 200
    assert body == stored
    assert len(messages) > 4
    assert not [w for w in recwarn if "synchronous iterators" in str(w.message)]
    assert _open_fds() == fds


def test_a_range_download_under_asgi(session_id, agent_client, recwarn):
    url = f"/api/v1/sessions/{session_id}/files/work_products/data.bin"
    assert _request("PUT", url, agent_client.key, [bytes(range(100))])[0] == 201

    status, body = _request("GET", url, agent_client.key, [b""], headers=[(b"range", b"bytes=10-19")])
    beyond, _ = _request("GET", url, agent_client.key, [b""], headers=[(b"range", b"bytes=500-600")])

    assert (status, body) == (206, bytes(range(10, 20)))
    assert beyond == 416
    assert not [w for w in recwarn if "synchronous iterators" in str(w.message)]
