"""Agent-written files never run as script on Switchyard's origin: every download route sends
the same headers (workspaces/files/download_headers.py), whatever type the uploader claimed.

Before the fix the API served ``x.html`` inline as ``text/html`` (``x.svg`` as
``image/svg+xml``) with no Content-Disposition and no CSP: each case below failed there.
"""

import pytest
from django.test import Client

from config.pages import ENGINEERS
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

SANDBOX = "sandbox; default-src 'none'"
HOSTILE = b"<html><script>fetch('/api/v1/agents/').then(r => r.text()).then(alert)</script></html>"

# name, body, the Content-Type the uploader sent, the type served, inline?
CASES = [
    ("x.html", HOSTILE, "text/plain", "application/octet-stream", False),
    ("x.htm", HOSTILE, "image/png", "application/octet-stream", False),
    (
        "x.svg",
        b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
        "image/png",
        "application/octet-stream",
        False,
    ),
    ("x.xhtml", HOSTILE, "text/plain", "application/octet-stream", False),
    ("x.xml", b"<?xml version='1.0'?><a/>", "text/plain", "application/octet-stream", False),
    ("x.js", b"alert(document.cookie)", "text/plain", "application/octet-stream", False),
    ("x.unknownext", HOSTILE, "text/html", "application/octet-stream", False),
    ("noext", HOSTILE, "text/html", "application/octet-stream", False),
    ("x.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 16, "text/html", "image/png", True),
    ("x.txt", HOSTILE, "text/html", "text/plain; charset=utf-8", True),
    ("x.pdf", b"%PDF-1.4\n%%EOF\n", "text/html", "application/pdf", True),
]


@pytest.fixture
def opened(agent_client):
    return agent_client.post("/api/v1/sessions/", {"intent": "downloads"}, format="json").json()["id"]


@pytest.fixture
def engineer_client(db) -> Client:
    client = Client()
    client.force_login(user_in(ENGINEERS, username="eng"))
    return client


def upload(agent_client, session_id, name, body, content_type):
    response = agent_client.put(
        f"/api/v1/sessions/{session_id}/files/work_products/{name}", data=body, content_type=content_type
    )
    assert response.status_code == 201, response.content


def assert_download_headers(response, name, served_type, inline):
    disposition = "inline" if inline else "attachment"
    assert response["Content-Type"] == served_type
    assert response["Content-Disposition"] == f"{disposition}; filename*=UTF-8''{name}"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == SANDBOX


@pytest.fixture(params=["api-agent", "api-staff", "page"])
def download(request, agent_client, opened):
    """GET a work product of the session through one of the routes that serve it."""
    if request.param == "page":
        client, prefix = request.getfixturevalue("engineer_client"), f"/sessions/{opened}/files/work_products/"
    else:
        client = agent_client if request.param == "api-agent" else request.getfixturevalue("staff_client")
        prefix = f"/api/v1/sessions/{opened}/files/work_products/"

    def get(name, **headers):
        return client.get(prefix + name, **headers)

    return get


@pytest.mark.parametrize(("name", "body", "claimed", "served", "inline"), CASES)
def test_every_route_serves_a_file_with_its_download_headers(
    download, agent_client, opened, name, body, claimed, served, inline
):
    # given a file uploaded with a Content-Type that lies about it
    upload(agent_client, opened, name, body, claimed)

    # when it is downloaded
    response = download(name)

    # then its bytes are intact, and only a passive type is shown inline, with its own type
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == body
    assert_download_headers(response, name, served, inline)


@pytest.mark.parametrize(
    ("name", "served", "inline"), [("x.html", "application/octet-stream", False), ("x.png", "image/png", True)]
)
def test_a_range_answer_carries_the_same_headers(download, agent_client, opened, name, served, inline):
    upload(agent_client, opened, name, bytes(range(100)), "text/html")

    part = download(name, HTTP_RANGE="bytes=10-19")
    beyond = download(name, HTTP_RANGE="bytes=500-600")

    assert part.status_code == 206
    assert b"".join(part.streaming_content) == bytes(range(10, 20))
    assert part["Content-Range"] == "bytes 10-19/100"
    assert_download_headers(part, name, served, inline)
    assert beyond.status_code == 416
    assert beyond["Content-Range"] == "bytes */100"
    assert beyond["Content-Type"] == "application/json"
    assert beyond.json() == {"message": "Range not satisfiable: the file has 100 bytes."}
    assert (beyond["X-Content-Type-Options"], beyond["Content-Security-Policy"]) == ("nosniff", SANDBOX)


def test_a_file_name_cannot_break_out_of_its_header(download, agent_client, opened):
    name = "rapport final;ü's,x=y.html"
    upload(agent_client, opened, name, HOSTILE, "text/html")

    response = download(name)

    assert response.status_code == 200
    assert response["Content-Disposition"] == "attachment; filename*=UTF-8''rapport%20final%3B%C3%BC%27s%2Cx%3Dy.html"
    assert response["Content-Type"] == "application/octet-stream"
