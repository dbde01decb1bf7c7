"""DOWNLOAD_HOST: people's downloads leave Switchyard's origin for a host that serves only
signed links (workspaces/files/download_host.py)."""

from urllib.parse import urlsplit

import pytest
from django.core import signing
from django.test import Client

from config.pages import ENGINEERS
from tests.page_users import user_in
from workspaces.files import download_host
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db

FILES_HOST = "files.testserver"
BODY = b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>"


@pytest.fixture
def files_host(settings):
    settings.DOWNLOAD_HOST = FILES_HOST
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, FILES_HOST]


@pytest.fixture
def opened(agent_client):
    session_id = agent_client.post("/api/v1/sessions/", {"intent": "downloads"}, format="json").json()["id"]
    put = agent_client.put(
        f"/api/v1/sessions/{session_id}/files/work_products/chart.svg", data=BODY, content_type="image/png"
    )
    assert put.status_code == 201
    return session_id


@pytest.fixture
def engineer_client(db) -> Client:
    client = Client()
    client.force_login(user_in(ENGINEERS, username="eng"))
    return client


def follow_to_files_host(response):
    """Open the signed link as a browser would: on the download host, with no cookie at all."""
    assert response.status_code == 302
    link = urlsplit(response["Location"])
    assert (link.scheme, link.netloc) == ("http", FILES_HOST)
    assert link.path.startswith("/downloads/")
    return Client().get(link.path, HTTP_HOST=FILES_HOST)


@pytest.mark.parametrize("route", ["page", "api"])
def test_a_persons_download_is_redirected_to_a_signed_link_on_the_download_host(
    files_host, opened, route, engineer_client, staff_client
):
    # when an engineer opens the file on the main host (the page's link, or the API under a login)
    if route == "page":
        response = engineer_client.get(f"/sessions/{opened}/files/work_products/chart.svg")
    else:
        response = staff_client.get(f"/api/v1/sessions/{opened}/files/work_products/chart.svg")

    # then no byte comes from the main host, and the signed link serves the file with its headers
    assert not getattr(response, "streaming", False)
    served = follow_to_files_host(response)
    assert served.status_code == 200
    assert b"".join(served.streaming_content) == BODY
    assert served["Content-Type"] == "application/octet-stream"
    assert served["Content-Disposition"] == "attachment; filename*=UTF-8''chart.svg"
    assert served["Content-Security-Policy"] == "sandbox; default-src 'none'"
    assert served["X-Content-Type-Options"] == "nosniff"


def test_a_signed_link_serves_ranges(files_host, opened, engineer_client):
    response = engineer_client.get(f"/sessions/{opened}/files/work_products/chart.svg")
    link = urlsplit(response["Location"]).path

    part = Client().get(link, HTTP_HOST=FILES_HOST, HTTP_RANGE="bytes=0-3")

    assert part.status_code == 206
    assert b"".join(part.streaming_content) == BODY[:4]
    assert part["Content-Disposition"] == "attachment; filename*=UTF-8''chart.svg"


def test_an_agents_key_download_is_served_directly_with_the_headers(files_host, opened, agent_client):
    response = agent_client.get(f"/api/v1/sessions/{opened}/files/work_products/chart.svg")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == BODY
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_the_download_host_answers_nothing_but_signed_links(files_host, opened, staff_client):
    # given a logged-in engineer's client pointed at the download host
    for path in ("/", "/accounts/login/", "/api/v1/sessions/", f"/sessions/{opened}/files/work_products/chart.svg"):
        assert staff_client.get(path, HTTP_HOST=FILES_HOST).status_code == 404, path
    assert (
        staff_client.get(f"/api/v1/sessions/{opened}/files/work_products/chart.svg", HTTP_HOST=FILES_HOST).status_code
        == 404
    )


def test_the_main_host_never_serves_a_signed_link(files_host, opened, engineer_client):
    link = urlsplit(engineer_client.get(f"/sessions/{opened}/files/work_products/chart.svg")["Location"]).path

    assert engineer_client.get(link).status_code == 404


def test_a_forged_or_expired_link_is_a_404(files_host, opened, engineer_client, monkeypatch):
    link = urlsplit(engineer_client.get(f"/sessions/{opened}/files/work_products/chart.svg")["Location"]).path
    token = link.removeprefix("/downloads/")
    workspace_id = Artifact.objects.get(path="work_products/chart.svg").workspace_id
    forged = signing.dumps({"w": workspace_id, "p": "work_products/chart.svg"}, salt="another salt", compress=True)

    assert Client().get(f"/downloads/{forged}", HTTP_HOST=FILES_HOST).status_code == 404
    assert Client().get(f"/downloads/{token[:-2]}xx", HTTP_HOST=FILES_HOST).status_code == 404
    monkeypatch.setattr(download_host, "LINK_TTL_SECONDS", -1)  # every link is now past its age
    assert Client().get(link, HTTP_HOST=FILES_HOST).status_code == 404


def test_a_missing_file_is_a_404_on_the_main_host_not_a_link(files_host, opened, engineer_client):
    assert engineer_client.get(f"/sessions/{opened}/files/work_products/missing.svg").status_code == 404


def test_without_a_download_host_the_links_are_not_served(opened, engineer_client):
    response = engineer_client.get(f"/sessions/{opened}/files/work_products/chart.svg")
    # a link signed as the download host would sign it, for the real file
    workspace_id = Artifact.objects.get(path="work_products/chart.svg").workspace_id
    token = signing.dumps({"w": workspace_id, "p": "work_products/chart.svg"}, salt=download_host.SALT, compress=True)

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == BODY
    assert Client().get(f"/downloads/{token}").status_code == 404
