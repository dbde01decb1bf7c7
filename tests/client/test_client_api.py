"""Every method of switchyard_client.Client once, against the app served by uvicorn."""

import pytest

from board.models import Task
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from switchyard_client.api.client import Client
from switchyard_client.api.errors import Conflict, ConnectionFailed, Forbidden, NotFound, Unauthorized
from tests.client.live import FAST_RETRY
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db(transaction=True)


def test_agent_and_session_methods(sy):
    assert sy.agent_me()["slug"] == "claude-1"
    assert sy.agent_heartbeat()["last_heartbeat_at"]

    opened = sy.session_open(id="sess-api", intent="Fix the login bug", labels=["auth"], status="running")
    again = sy.session_open(id="sess-api", intent="Fix the login bug")

    assert opened["id"] == again["id"] == "sess-api"
    assert opened["workspace"]["path"]
    assert [s["id"] for s in sy.session_list(status="running")] == ["sess-api"]
    assert sy.session_get("sess-api")["intent"] == "Fix the login bug"
    assert sy.session_heartbeat("sess-api")["last_heartbeat_at"]
    moved = sy.session_transition("sess-api", "waiting_for_input", reason="asking")
    assert (moved["changed"], moved["session"]["status"]) == (True, "waiting_for_input")
    assert sy.session_log("sess-api")["exists"] is False
    assert AgentSession.objects.get().status == "waiting_for_input"


def test_event_tool_call_checkpoint_and_milestone_methods(sy):
    sid = sy.session_open(id="sess-rec", intent="record", status="running")["id"]

    one = sy.event_append(sid, "log", {"line": "compiling"}, id="ev-1")
    batch = sy.events_append(sid, [{"type": "log", "payload": {"n": 1}}, {"type": "nope"}])
    page = sy.events_list(sid, after_seq=0, limit=10)
    started = sy.tool_call_start(sid, "Bash", {"command": "ls"}, id="toolu_1")
    by_server_id = sy.tool_call_finish(started["id"], "success", output={"stdout": "a b"})
    sy.tool_call_start(sid, "Read", {"file_path": "x"}, id="toolu_2")
    by_client_id = sy.tool_call_finish_by_client_id(sid, "toolu_2", "failure", error="no such file")
    recorded = sy.tool_calls_record(sid, [{"tool_name": "Grep", "input": {"q": "x"}, "status": "success"}])
    checkpoint = sy.checkpoint_save(sid, {"step": 3})
    milestone = sy.milestone_record(sid, "Tests pass")

    assert one["client_id"] == "ev-1"
    assert (batch["stored"], batch["failed"], batch["results"][1]["status"]) == (1, 1, 400)
    assert [e["seq"] for e in page["results"]] == [1, 2]
    assert by_server_id["status"] == "success"
    assert by_client_id["status"] == "failure"
    assert recorded["stored"] == 1
    assert sy.tool_call_get(started["id"])["client_id"] == "toolu_1"
    assert sy.tool_call_get_by_client_id(sid, "toolu_2")["error"] == "no such file"
    assert [c["tool_name"] for c in sy.tool_calls_list(sid, status="success")] == ["Bash", "Grep"]
    assert sy.checkpoint_latest(sid)["seq"] == checkpoint["seq"]
    assert [m["text"] for m in sy.milestones_list(sid)] == [milestone["text"]]
    resume = sy.resume(sid)
    assert resume["checkpoint"]["state"] == {"step": 3}
    assert [m["text"] for m in resume["milestones"]] == ["Tests pass"]
    assert StreamEvent.objects.filter(session_id=sid, type="log").count() == 2
    assert ToolInvocation.objects.count() == 3
    assert (Checkpoint.objects.count(), Milestone.objects.count()) == (1, 1)


def test_file_methods(sy, tmp_path, server_roots):
    sid = sy.session_open(id="sess-files", intent="files")["id"]
    local = tmp_path / "report.md"
    local.write_text("# Report\n")

    written = sy.file_put(sid, "work_products/report.md", local)
    same = sy.file_put(sid, "work_products/report.md", b"# Report\n")
    listed = sy.files_list(sid)
    exported = sy.artifact_export(written["artifact"]["id"], str(server_roots["EXPORT_ROOT"] / "report.md"))
    sy.file_get(sid, "work_products/report.md", to=tmp_path / "copy.md")

    assert (written["created"], same["created"]) == (True, False)
    assert sy.file_get(sid, "work_products/report.md") == b"# Report\n"
    assert (tmp_path / "copy.md").read_text() == "# Report\n"
    assert [a["path"] for a in listed] == ["work_products/report.md"]
    assert exported["size"] == 9
    assert Artifact.objects.get().kind == "work_product"


def test_task_and_campaign_methods(sy):
    sid = sy.session_open(id="sess-tasks", intent="tasks", status="running")["id"]
    campaign = sy.campaign_create({"type": "marketing-campaign", "name": "Launch", "deliverables": ["blog-post"]})
    first = sy.task_create("Write the changelog", priority="P0")
    second = sy.task_create("Fix the flaky test", priority="P1")

    claimed = sy.task_claim_next(session=sid)
    released = sy.task_release(claimed["id"])
    again = sy.task_claim(first["id"], session=sid)
    done = sy.task_complete(first["id"])
    sy.task_claim(second["id"])
    failed = sy.task_fail(second["id"], "flaky for real", retry=False)

    assert claimed["id"] == first["id"]
    assert released["status"] == "ready"
    assert again["assignee"] == "claude-1"
    assert done["status"] == "done"
    assert failed["status"] == "failed"
    assert sy.task_get(second["id"])["error"] == "flaky for real"
    assert {t["title"] for t in sy.tasks_list()} >= {"Write the changelog", "Fix the flaky test"}
    assert sy.campaign_get(campaign["id"])["name"] == "Launch"
    assert [c["id"] for c in sy.campaigns_list()] == [campaign["id"]]
    Task.objects.exclude(campaign=None).update(status="done")
    assert sy.task_claim_next() is None


def test_worktree_methods(sy, tmp_path):
    from tests.workspaces.conftest import commit_file, git
    from workspaces.worktrees.services import repository_register

    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# app\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))

    assert [r["id"] for r in sy.repositories_list()] == [repository.pk]
    created = sy.worktree_create(repository.pk, "feat", "login")
    assert sy.worktree_create(repository.pk, "feat", "login")["id"] == created["id"]
    claim = sy.worktree_claim(created["id"])
    assert (claim["outcome"], claim["worktree"]["holder"]) == ("granted", "claude-1")
    assert sy.worktree_get(created["id"])["monitor"]["holder"] == "claude-1"
    assert sy.worktree_config_sync(created["id"])["worktree_id"] == created["id"]
    assert sy.worktree_remove(created["id"], force=True)["status"] == "removed"
    second = sy.worktree_create(repository.pk, "fix", "typo")
    sy.worktree_claim(second["id"])
    assert sy.worktree_release(second["id"])["holder"] is None


def test_errors_carry_the_status_and_the_servers_message(sy, sy_server, other_key, dead_url):
    sy.session_open(id="sess-err", intent="errors", status="running")
    sy.session_transition("sess-err", "completed")

    with pytest.raises(Conflict) as conflict:
        sy.session_transition("sess-err", "running")
    with pytest.raises(NotFound):
        sy.session_get("no-such-session")
    with Client(sy_server.url, other_key, retry=FAST_RETRY) as other, pytest.raises(Forbidden):
        other.session_get("sess-err")
    with Client(sy_server.url, "sy_bad_key", retry=FAST_RETRY) as bad, pytest.raises(Unauthorized):
        bad.agent_me()
    with Client(dead_url, "sy_x", retry=FAST_RETRY) as dead, pytest.raises(ConnectionFailed):
        dead.agent_me()

    assert conflict.value.status == 409
    assert "completed" in conflict.value.message
    assert conflict.value.body["allowed"] == []


def test_a_client_for_another_key_shares_the_connections_and_sends_its_own_key(sy, other_key):
    # Given the runner's way of talking for each run: a client per agent key over one httpx client
    other = sy.with_key(other_key)

    # When each asks who it is, and the other is closed
    mine, theirs = sy.agent_me()["slug"], other.agent_me()["slug"]
    other.close()

    # Then each request carried its own client's key, and closing the other left this one open
    assert (mine, theirs) == ("claude-1", "codex-2")
    assert other._http is sy._http
    assert sy.agent_me()["slug"] == "claude-1"
    sy.session_open(id="sess-mine", intent="only mine", status="running")
    with pytest.raises(Forbidden):
        sy.with_key(other_key).session_get("sess-mine")


def test_an_http_server_gets_no_ca_bundle_loaded(sy_server):
    # An http:// URL: nothing to verify, so certifi's bundle is not loaded (a runner's memory)
    from switchyard_client.api.client import _ssl_context

    context = _ssl_context(sy_server.url + "/api/v1/")

    assert context.cert_store_stats()["x509_ca"] == 0
    assert _ssl_context("https://sy.example/api/v1/").cert_store_stats()["x509_ca"] > 0
