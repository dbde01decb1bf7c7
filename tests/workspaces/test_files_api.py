import hashlib
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from ledger.models import Event
from tests.config.test_safepaths import REFUSED
from tests.factories import ToolCallFactory
from workspaces.models import Artifact, ArtifactVersion, Workspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def opened(agent_client):
    """A session opened through the API, so it has its workspace folder."""
    body = agent_client.post("/api/v1/sessions/", {"intent": "write a report"}, format="json").json()
    return body


def files_url(session_id: str, path: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/files/{path}"


def put(client, session_id, url_path, data=b"hello", **extra):
    return client.put(files_url(session_id, url_path), data=data, content_type="application/octet-stream", **extra)


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())


def test_opening_a_session_makes_its_folder(opened, file_roots):
    root = Path(opened["workspace"]["path"])

    assert root.parent == file_roots["WORKSPACE_ROOT"]
    assert root.name == opened["id"]
    assert sorted(os.listdir(root)) == ["media", "search_results", "work_products", "workbench_activity"]
    assert opened["workspace"]["kind"] == "session"


def test_a_client_chosen_session_id_never_becomes_the_folder_name(agent_client):
    body = agent_client.post("/api/v1/sessions/", {"id": "my-thread"}, format="json").json()

    assert Path(body["workspace"]["path"]).name.startswith("session_")


def test_write_read_and_list_with_versions(agent_client, opened):
    sid = opened["id"]

    first = put(agent_client, sid, "work_products/report.md", b"# v1")
    second = put(agent_client, sid, "work_products/report.md", b"# version two")
    same = put(agent_client, sid, "work_products/report.md", b"# version two")
    read = agent_client.get(files_url(sid, "work_products/report.md"))
    listing = agent_client.get(files_url(sid)).json()

    assert (first.status_code, second.status_code, same.status_code) == (201, 201, 200)
    assert same.json()["created"] is False
    assert b"".join(read.streaming_content) == b"# version two"
    [artifact] = listing["results"]
    assert artifact["kind"] == "work_product"
    assert artifact["sha256"] == hashlib.sha256(b"# version two").hexdigest()
    assert [(v["number"], v["sha256"]) for v in artifact["versions"]] == [
        (2, hashlib.sha256(b"# version two").hexdigest()),
        (1, hashlib.sha256(b"# v1").hexdigest()),
    ]
    assert Event.objects.filter(name="artifact.created").count() == 2
    assert (Path(opened["workspace"]["path"]) / "work_products/report.md").read_bytes() == b"# version two"


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("work_products/a.pdf", "work_product"),
        ("search_results/q.json", "search_result"),
        ("media/chart.png", "media"),
        ("workbench_activity/run.txt", "log"),
        ("notes/plan.md", "note"),
        ("src/app.py", "code"),
    ],
)
def test_the_folder_decides_the_kind(agent_client, opened, path, kind):
    response = put(agent_client, opened["id"], path)

    assert response.json()["artifact"]["kind"] == kind


def test_range_requests(agent_client, opened):
    sid = opened["id"]
    put(agent_client, sid, "work_products/data.bin", bytes(range(100)))
    url = files_url(sid, "work_products/data.bin")

    middle = agent_client.get(url, HTTP_RANGE="bytes=10-19")
    tail = agent_client.get(url, HTTP_RANGE="bytes=-5")
    beyond = agent_client.get(url, HTTP_RANGE="bytes=500-600")
    full = agent_client.get(url)

    assert middle.status_code == 206
    assert middle["Content-Range"] == "bytes 10-19/100"
    assert b"".join(middle.streaming_content) == bytes(range(10, 20))
    assert b"".join(tail.streaming_content) == bytes(range(95, 100))
    assert beyond.status_code == 416
    assert beyond["Content-Range"] == "bytes */100"
    assert full["Accept-Ranges"] == "bytes"
    assert int(full["Content-Length"]) == 100


def test_reading_a_missing_file_is_404(agent_client, opened):
    assert agent_client.get(files_url(opened["id"], "work_products/none.md")).status_code == 404


def test_an_upload_links_the_tool_call_that_wrote_it(agent_client, opened):
    from sessions_app.models import AgentSession

    call = ToolCallFactory(session=AgentSession.objects.get(pk=opened["id"]), client_id="toolu_9")

    by_id = put(agent_client, opened["id"], f"work_products/a.md?tool_call={call.pk}")
    by_client_id = put(agent_client, opened["id"], "work_products/b.md?tool_use_id=toolu_9")
    wrong = put(agent_client, opened["id"], "work_products/c.md?tool_call=99999")

    assert by_id.json()["artifact"]["tool_call"] == call.pk
    assert by_client_id.json()["artifact"]["tool_call"] == call.pk
    assert wrong.status_code == 404  # the tool call named is not there (the id itself is well formed)
    assert not Artifact.objects.filter(path="work_products/c.md").exists()


def test_an_upload_of_bytes_already_recorded_still_links_its_tool_call(agent_client, opened):
    # given a file the observer recorded first (no tool call), and the tool call that wrote it
    from sessions_app.models import AgentSession

    put(agent_client, opened["id"], "work_products/seen.md", b"same bytes")
    Artifact.objects.filter(path="work_products/seen.md").update(tool_invocation=None)
    call = ToolCallFactory(session=AgentSession.objects.get(pk=opened["id"]), client_id="toolu_late")

    # when the hook uploads the same bytes naming the tool call, twice (a retry)
    first = put(agent_client, opened["id"], "work_products/seen.md?tool_use_id=toolu_late", b"same bytes")
    again = put(agent_client, opened["id"], "work_products/seen.md?tool_use_id=toolu_late", b"same bytes")

    # then no version is added, the artifact links the tool call, and that was said once
    assert first.status_code == again.status_code == 200
    assert first.json()["artifact"]["tool_call"] == call.pk
    artifact = Artifact.objects.get(path="work_products/seen.md")
    assert (artifact.tool_invocation_id, artifact.versions.count()) == (call.pk, 1)
    linked = Event.objects.filter(name="artifact.linked")
    assert [(e.subject_id, e.payload["version"], e.payload["tool_call"]) for e in linked] == [
        (str(artifact.pk), 1, call.pk)
    ]


def _url_form(raw: str) -> str:
    # The test client percent-decodes the URL once, as a server would: encode once so the
    # view receives exactly ``raw``. NUL and lone surrogates cannot be encoded that way.
    return quote(raw.encode("utf-8", "surrogatepass"), safe="/:;").replace("%ED%A0%80", "%ED%A0%80")


@pytest.mark.parametrize(("raw", "reason"), [case for case in REFUSED if case[0] not in ("", "dir/")])
def test_every_unsafe_path_is_refused_through_the_api_and_nothing_is_written(
    agent_client, opened, tmp_path, raw, reason
):
    root = Path(opened["workspace"]["path"])
    before = all_files(tmp_path)

    response = put(agent_client, opened["id"], _url_form(raw))

    assert response.status_code == 400, response.content
    assert "Refused path" in response.json()["message"] or "not valid UTF-8" in response.json()["message"]
    assert all_files(tmp_path) == before
    assert all_files(root) == []
    assert Artifact.objects.count() == 0


def test_a_symlink_out_of_the_workspace_is_refused(agent_client, opened, tmp_path):
    root = Path(opened["workspace"]["path"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "work_products" / "escape").symlink_to(outside)
    (root / "work_products" / "secret.txt").symlink_to(outside / "secret.txt")

    write = put(agent_client, opened["id"], "work_products/escape/new.txt")
    read = agent_client.get(files_url(opened["id"], "work_products/escape/secret.txt"))
    read_link = agent_client.get(files_url(opened["id"], "work_products/secret.txt"))

    assert (write.status_code, read.status_code, read_link.status_code) == (400, 400, 400)
    assert "symbolic link" in write.json()["message"]
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert Artifact.objects.count() == 0


def test_a_symlink_swapped_in_during_uploads_never_lets_a_write_out(agent_client, opened, tmp_path):
    """A folder on the path flips between a real folder and a symlink to the outside
    while uploads run: every upload either lands inside or is refused."""
    root = Path(opened["workspace"]["path"]) / "work_products"
    outside = tmp_path / "outside"
    outside.mkdir()
    target = root / "flip"
    stop = threading.Event()

    def flipper():
        while not stop.is_set():
            try:
                if target.is_symlink():
                    target.unlink()
                    target.mkdir()
                elif target.is_dir():
                    for child in target.iterdir():
                        child.unlink()
                    target.rmdir()
                    target.symlink_to(outside)
                else:
                    target.mkdir()
            except OSError:
                pass  # the upload raced us; flip again

    thread = threading.Thread(target=flipper)
    thread.start()
    codes = []
    try:
        for i in range(60):
            codes.append(put(agent_client, opened["id"], f"work_products/flip/f{i}.txt", b"x").status_code)
    finally:
        stop.set()
        thread.join()

    assert os.listdir(outside) == []
    assert set(codes) <= {201, 400, 404, 409}


def test_another_agent_is_refused_and_nothing_is_written(other_client, opened):
    root = Path(opened["workspace"]["path"])

    write = put(other_client, opened["id"], "work_products/x.md")
    read = other_client.get(files_url(opened["id"], "work_products/x.md"))
    listing = other_client.get(files_url(opened["id"]))

    assert (write.status_code, read.status_code, listing.status_code) == (403, 403, 403)
    assert all_files(root) == []
    assert Artifact.objects.count() == 0


def test_an_upload_over_the_limit_is_413_and_leaves_nothing(agent_client, opened, settings):
    settings.FILE_UPLOAD_MAX_BYTES = 1000
    root = Path(opened["workspace"]["path"])

    response = put(agent_client, opened["id"], "work_products/big.bin", b"x" * 5000)

    assert response.status_code == 413
    assert all_files(root) == []
    assert ArtifactVersion.objects.count() == 0


def test_a_finished_session_takes_no_new_files(agent_client, opened):
    agent_client.post(f"/api/v1/sessions/{opened['id']}/transition/", {"status": "cancelled"}, format="json")

    response = put(agent_client, opened["id"], "work_products/late.md")

    assert response.status_code == 409
    assert Artifact.objects.count() == 0


def test_writing_over_a_folder_is_409(agent_client, opened):
    response = put(agent_client, opened["id"], "work_products")

    assert response.status_code == 409
    assert Artifact.objects.count() == 0


class TestSharedWorkspace:
    @pytest.fixture
    def shared(self, agent_client):
        return agent_client.post("/api/v1/sessions/", {"workspace": "shared"}, format="json").json()

    def test_a_bare_filename_is_the_whole_path(self, agent_client, shared, file_roots):
        response = put(agent_client, shared["id"], "summary.pdf", b"%PDF")

        assert response.status_code == 201
        assert response.json()["artifact"]["kind"] == "work_product"
        assert (file_roots["WORKSPACE_ROOT"] / "default" / "summary.pdf").read_bytes() == b"%PDF"
        assert Workspace.objects.get().kind == "shared"

    def test_sub_folders_are_refused(self, agent_client, shared, file_roots):
        response = put(agent_client, shared["id"], "work_products/summary.pdf")

        assert response.status_code == 400
        assert "sub-folders" in response.json()["message"]
        assert all_files(file_roots["WORKSPACE_ROOT"]) == []

    def test_two_sessions_share_one_workspace(self, agent_client, shared):
        other = agent_client.post("/api/v1/sessions/", {"workspace": "shared"}, format="json").json()

        assert other["workspace"]["id"] == shared["workspace"]["id"]
        assert Workspace.objects.count() == 1
