"""Uploads through the real ASGI server (uvicorn, in its own process): a chunked body is stored
whole, one cut short leaves nothing, and a web process killed mid-upload leaves a temporary
that the next start removes.

Before the fix a chunked PUT answered 201 and stored an empty file (and an empty backup):
DRF takes a body without Content-Length for an empty one. The first test failed there.
"""

import hashlib
import os
import socket
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.browser.server import ServerProcess
from workspaces.models import Artifact, ArtifactVersion

MB = 1024 * 1024


@pytest.fixture
def session_root(transactional_db, agent_client, file_roots):
    """A session opened in-process (committed, so the server sees it): its id and folder."""
    body = agent_client.post("/api/v1/sessions/", {"intent": "live uploads"}, format="json").json()
    return body["id"], Path(body["workspace"]["path"])


@pytest.fixture
def start_server(tmp_path, monkeypatch):
    servers = []

    def start(**env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)  # worker_environment() copies os.environ
        servers.append(ServerProcess(tmp_path / f"server{len(servers)}.log").start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def part_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(".part"))


def open_put(server, path: str, key: str, *, length: int | None) -> socket.socket:
    """A PUT whose headers are sent and whose body is not: chunked unless ``length`` is given."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    sock.sendall(
        f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/octet-stream\r\n{framing}\r\n\r\n".encode()
    )
    return sock


def send_chunk(sock: socket.socket, data: bytes) -> None:
    sock.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def read_status(sock: socket.socket) -> int:
    received = b""
    while b"\r\n" not in received:
        block = sock.recv(4096)
        assert block, f"connection closed before a status line: {received!r}"
        received += block
    return int(received.split(b" ", 2)[1])


def test_a_chunked_upload_of_several_megabytes_is_stored_byte_for_byte(session_root, agent_client, start_server):
    # given a server, and 6 MB of random bytes sent without a Content-Length, in uneven pieces
    server = start_server()
    session_id, root = session_root
    data = os.urandom(6 * MB + 12345)
    pieces = [data[i : i + 700_001] for i in range(0, len(data), 700_001)]
    url = f"{server.url}/api/v1/sessions/{session_id}/files/work_products/big.bin"
    headers = {"Authorization": f"Bearer {agent_client.key}", "Content-Type": "application/octet-stream"}

    # when it is PUT with Transfer-Encoding: chunked (httpx chunks a body of unknown length)
    response = httpx.put(url, content=iter(pieces), headers=headers, timeout=60)

    # then the file, its version and its backup hold exactly those bytes, and a GET returns them
    assert response.status_code == 201, response.text
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in response.request.headers
    digest = hashlib.sha256(data).hexdigest()
    artifact = Artifact.objects.get(path="work_products/big.bin")
    version = ArtifactVersion.objects.get(artifact=artifact)
    assert (artifact.size, artifact.sha256) == (len(data), digest)
    assert (version.size, version.sha256) == (len(data), digest)
    assert (root / "work_products" / "big.bin").read_bytes() == data
    assert Path(version.backup_location).read_bytes() == data
    assert part_files(root / "work_products") == []
    assert httpx.get(url, headers=headers, timeout=60).content == data


def test_a_chunked_upload_over_the_limit_is_a_413_and_stores_nothing(session_root, agent_client, start_server):
    server = start_server(FILE_UPLOAD_MAX_BYTES=str(MB))
    session_id, root = session_root
    before = files_under(root)

    # when a chunked body goes past the limit (and never says how long it is)
    sock = open_put(
        server, f"/api/v1/sessions/{session_id}/files/work_products/huge.bin", agent_client.key, length=None
    )
    with sock:
        for _ in range(4):
            send_chunk(sock, b"x" * (MB // 2))
        status = read_status(sock)

    # then it is refused, and nothing of it is left
    assert status == 413
    wait_for(lambda: files_under(root) == before, "the temporary file to be removed")
    assert not Artifact.objects.filter(path="work_products/huge.bin").exists()


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "sized"])
def test_a_client_gone_mid_body_leaves_no_artifact_and_no_temporary(session_root, agent_client, start_server, chunked):
    server = start_server()
    session_id, root = session_root
    before = files_under(root)
    path = f"/api/v1/sessions/{session_id}/files/work_products/cut.bin"

    # given an upload whose first 2 MB of 10 MB have arrived and are being written
    sock = open_put(server, path, agent_client.key, length=None if chunked else 10 * MB)
    first = b"y" * (2 * MB)
    if chunked:
        send_chunk(sock, first)
    else:
        sock.sendall(first)
    wait_for(lambda: part_files(root / "work_products"), "the upload's temporary file")

    # when the client goes away
    sock.close()

    # then its temporary file is removed and no artifact was recorded
    wait_for(lambda: files_under(root) == before, "the temporary file to be removed")
    assert not Artifact.objects.filter(path="work_products/cut.bin").exists()
    assert not ArtifactVersion.objects.exists()


def test_a_web_process_killed_mid_upload_leaves_a_temporary_the_next_start_removes(
    session_root, agent_client, start_server
):
    # given an upload in progress when its web process is killed with SIGKILL
    server = start_server()
    session_id, root = session_root
    folder = root / "work_products"
    sock = open_put(server, f"/api/v1/sessions/{session_id}/files/work_products/cut.bin", agent_client.key, length=None)
    send_chunk(sock, b"z" * (2 * MB))
    wait_for(lambda: part_files(folder), "the upload's temporary file")
    server.process.kill()
    server.process.wait(timeout=30)
    sock.close()
    [stale] = part_files(folder)  # nothing could remove it
    hour_ago = time.time() - 3601
    os.utime(stale, (hour_ago, hour_ago))  # as it is an hour later (UPLOAD_TIMEOUT_SECONDS)
    # ... and another web process's upload, fresh, in the same folder
    fresh = folder / f".other.bin.{uuid.uuid4().hex}.part"
    fresh.write_bytes(b"in progress")

    # when the web server starts again
    start_server()

    # then the abandoned temporary is removed, the fresh one kept, and neither is an artifact
    wait_for(lambda: not stale.exists(), "the start-up sweep")
    assert part_files(folder) == [fresh]
    assert not Artifact.objects.exists()
