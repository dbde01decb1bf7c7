"""The session pages: who may open them, the list with filters and search, the detail page,
its log tail and artifact downloads."""

from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone
from tests.factories import AgentFactory, SessionFactory, StreamEventFactory, ToolCallFactory


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/sessions/", "/sessions/sess-1/", "/sessions/sess-1/log-tail/?offset=0"])
def test_a_product_owner_is_refused(product_owner_client, session, url):
    response = product_owner_client.get(url)

    assert response.status_code == 403


@pytest.mark.django_db
def test_anonymous_goes_to_login(client, session):
    response = client.get("/sessions/sess-1/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_engineer_sees_the_list_with_status_agent_and_intent(engineer_client, session):
    response = engineer_client.get("/sessions/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Fix the flaky test" in html
    assert 'href="/sessions/sess-1/"' in html
    assert "status-running" in html
    assert "Claude-1" in html


@pytest.mark.django_db
def test_filters_by_status_and_agent_and_keeps_them_in_the_pager(engineer_client, agent, other_agent):
    for n in range(30):
        SessionFactory(agent=agent, id=f"mine-{n:02d}", status=AgentSession.Status.RUNNING)
    SessionFactory(agent=other_agent, id="theirs", status=AgentSession.Status.RUNNING)
    SessionFactory(agent=agent, id="done-one", status=AgentSession.Status.COMPLETED, ended_at=timezone.now())

    response = engineer_client.get("/sessions/?status=running&agent=claude-1")

    html = response.content.decode()
    assert response.context["page"].paginator.count == 30
    assert "theirs" not in html and "done-one" not in html
    assert "?status=running&amp;agent=claude-1&amp;page=2" in html


@pytest.mark.django_db
def test_search_finds_a_session_by_milestone_text(engineer_client, agent):
    wanted = SessionFactory(agent=agent, id="wanted", intent="Refactor billing")
    SessionFactory(agent=agent, id="unrelated", intent="Write docs")
    Milestone.objects.create(session=wanted, text="Migrated the invoices table to the new schema")

    response = engineer_client.get("/sessions/?q=invoices")

    assert [s.pk for s in response.context["page"].object_list] == ["wanted"]


@pytest.mark.django_db
def test_search_finds_a_session_by_intent(engineer_client, agent):
    SessionFactory(agent=agent, id="wanted", intent="Upgrade the payment gateway")
    SessionFactory(agent=agent, id="unrelated", intent="Write docs")

    response = engineer_client.get("/sessions/?q=gateway")

    assert [s.pk for s in response.context["page"].object_list] == ["wanted"]


@pytest.mark.django_db
@pytest.mark.parametrize("count", [3, 30])
def test_list_queries_do_not_grow_with_sessions(engineer_client, count, django_assert_num_queries):
    for n in range(count):
        session = SessionFactory(agent=AgentFactory(slug=f"a-{n}"))
        StreamEventFactory(session=session)
        Milestone.objects.create(session=session, text="step")

    # session, user, groups, agents for the filter, count, page
    with django_assert_num_queries(6):
        response = engineer_client.get("/sessions/?q=flaky")

    assert response.status_code == 200


@pytest.mark.django_db
def test_detail_shows_header_events_milestones_tool_calls_checkpoints(engineer_client, agent, session):
    session.repo, session.branch, session.pr_url = "acme/api", "feat-login", "https://example.com/pr/7"
    session.save()
    StreamEventFactory(session=session, seq=1, payload={"line": "<b>compiling</b>"})
    Milestone.objects.create(session=session, text="Tests green")
    now = timezone.now()
    ToolCallFactory(
        session=session, status=ToolInvocation.Status.SUCCESS, started_at=now, finished_at=now, duration_ms=1500
    )
    failed = ToolCallFactory(
        session=session,
        tool_name="Edit",
        status=ToolInvocation.Status.FAILURE,
        error="file not found",
        started_at=now,
        finished_at=now,
        duration_ms=20,
    )
    Checkpoint.objects.create(session=session, seq=1, state={"k": 1}, size_bytes=7)

    response = engineer_client.get("/sessions/sess-1/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "acme/api" in html and "feat-login" in html and 'href="https://example.com/pr/7"' in html
    assert 'id="event-1"' in html
    assert "&lt;b&gt;compiling&lt;/b&gt;" in html  # escaped, never markup
    assert "Tests green" in html
    assert f'id="toolcall-{failed.pk}" class="toolcall failure"' in html
    assert "file not found" in html
    assert "1.5 s" in html
    assert "<strong>#1</strong>" in html
    assert 'ws-connect="/ws/sessions/sess-1/"' in html


@pytest.mark.django_db
def test_detail_of_an_unknown_session_is_a_404(engineer_client):
    assert engineer_client.get("/sessions/nope/").status_code == 404


def _log(session, data: bytes) -> Path:
    path = Path(settings.LOGS_ROOT) / "orchestrator-sessions" / f"session-{session.pk}" / f"{session.agent.slug}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.django_db
def test_detail_opens_on_the_last_64_kib_of_the_log(engineer_client, session):
    _log(session, b"x" * 70_000 + b"\nthe end\n")

    response = engineer_client.get("/sessions/sess-1/")

    assert response.context["log"].offset == 70_009 - 65_536
    assert response.context["log"].next_offset == 70_009
    assert 'offset=70009" hx-trigger="every 2s"' in response.content.decode()


@pytest.mark.django_db
def test_log_tail_returns_what_was_appended_and_the_next_poller(engineer_client, session):
    _log(session, b"one\n<two>\n")

    response = engineer_client.get("/sessions/sess-1/log-tail/?offset=4")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'hx-swap-oob="beforeend:#log-output">&lt;two&gt;\n</div>' in html
    assert "log-tail/?offset=10" in html


@pytest.mark.django_db
def test_artifact_download_streams_the_workspace_file(engineer_client, agent):
    from config.actors import Actor
    from sessions_app.services import session_open

    session, _ = session_open(actor=Actor(agent=agent), agent=agent, session_id="with-files")
    Path(session.workspace.root_path, "work_products").mkdir(parents=True, exist_ok=True)
    Path(session.workspace.root_path, "work_products", "report.md").write_text("# Report\n")

    response = engineer_client.get("/sessions/with-files/files/work_products/report.md")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"# Report\n"
    assert response["Content-Disposition"] == "attachment; filename*=UTF-8''report.md"
    assert engineer_client.get("/sessions/with-files/files/../../etc/passwd").status_code == 404
    assert engineer_client.get("/sessions/with-files/files/missing.md").status_code == 404
