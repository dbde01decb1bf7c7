"""The board page: columns, cards, filters, the task panel, and a constant number of queries."""

import pytest
from django.utils import timezone

from board.models import Task
from ledger.models import Event
from sessions_app.models import AgentSession
from tests.board.board_helpers import column_titles, product_owner
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory, ToolCallFactory, UserFactory


@pytest.fixture
def po_client(client, db):
    client.force_login(product_owner())
    return client


def _board_of(n: int) -> None:
    agent = AgentFactory(slug="claude-1", emoji="🦊")
    campaign = CampaignFactory(name="Spring launch")
    session = SessionFactory(agent=agent, status=AgentSession.Status.WAITING_FOR_INPUT)
    statuses = Task.Status.values
    for i in range(n):
        TaskFactory(
            title=f"Card {i}",
            status=statuses[i % len(statuses)],
            labels=["docs", f"l{i}"],
            assignee=agent if i % 2 else None,
            campaign=campaign if i % 3 else None,
            session=session if i % 2 else None,
        )


def test_columns_hold_their_cards_in_rank_order(po_client):
    TaskFactory(title="Second", status=Task.Status.READY, rank=2048)
    TaskFactory(title="First", status=Task.Status.READY, rank=1024)
    TaskFactory(title="Doing", status=Task.Status.REVIEW, rank=10)

    response = po_client.get("/")

    assert response.status_code == 200
    assert column_titles(response, "ready") == ["First", "Second"]
    assert column_titles(response, "review") == ["Doing"]
    assert column_titles(response, "backlog") == []
    html = response.content.decode()
    for status in Task.Status.values:
        assert f'id="column-{status}"' in html
    assert 'id="count-ready"' in html and ">2</span>" in html


def test_a_card_shows_priority_labels_agent_campaign_age_and_waiting(po_client):
    agent = AgentFactory(slug="claude-1", display_name="Claude One", emoji="🦊")
    session = SessionFactory(agent=agent, status=AgentSession.Status.WAITING_FOR_INPUT)
    TaskFactory(
        title="Ship it",
        priority="P0",
        labels=["release"],
        assignee=agent,
        session=session,
        campaign=CampaignFactory(name="Spring launch"),
    )

    html = po_client.get("/").content.decode()

    assert 'class="badge P0"' in html
    assert "<li>release</li>" in html
    assert "🦊</span> Claude One" in html
    assert "Spring launch" in html
    assert "Waiting for input" in html
    assert '<span class="age"' in html


@pytest.mark.parametrize("n", [3, 30])
def test_the_page_costs_the_same_queries_for_3_and_30_cards(po_client, django_assert_num_queries, n):
    _board_of(n)
    # session, user, groups (page access), tasks, agents, campaigns
    with django_assert_num_queries(6):
        response = po_client.get("/")
    assert response.status_code == 200
    assert response.content.decode().count('class="task-card') == n


@pytest.mark.parametrize("n", [3, 30])
def test_the_htmx_refetch_costs_the_same_queries(po_client, django_assert_num_queries, n):
    _board_of(n)
    with django_assert_num_queries(4):
        response = po_client.get("/", HTTP_HX_REQUEST="true")
    assert "board/_columns.html" in [template.name for template in response.templates]
    assert "<!doctype html>" not in response.content.decode()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("assignee=claude-1", ["Mine"]),
        ("priority=P0", ["Urgent"]),
        ("label=ops", ["Urgent"]),
        ("q=needle", ["Mine"]),
        ("q=NEEDLE", ["Mine"]),
        ("campaign=CAMPAIGN", ["In campaign"]),
    ],
)
def test_filters_narrow_the_board(po_client, query, expected):
    agent = AgentFactory(slug="claude-1")
    campaign = CampaignFactory()
    TaskFactory(title="Mine", assignee=agent, description="has a needle in it")
    TaskFactory(title="Urgent", priority="P0", labels=["ops", "infra"])
    TaskFactory(title="In campaign", campaign=campaign, labels=["opsy"])

    response = po_client.get("/?" + query.replace("CAMPAIGN", str(campaign.pk)))

    assert column_titles(response, "ready") == expected
    assert 'data-filtered="1"' in response.content.decode()


def test_a_bad_filter_is_reported_and_the_whole_board_shown(po_client):
    TaskFactory(title="Any")
    response = po_client.get("/?campaign=abc")
    assert response.status_code == 200
    assert "Some filters were ignored" in response.content.decode()
    assert column_titles(response, "ready") == ["Any"]


def test_filter_inputs_have_labels_and_keep_their_values(po_client):
    html = po_client.get("/?q=hello&label=ops").content.decode()
    for name in ("assignee", "campaign", "priority", "label", "q"):
        assert f'<label for="f-{name}">' in html
    assert 'value="hello"' in html and 'value="ops"' in html
    assert 'hx-push-url="true"' in html


def test_people_outside_the_board_groups_get_403_and_anonymous_the_login(client, db):
    assert client.get("/").status_code == 302
    client.force_login(UserFactory(username="nobody"))
    assert client.get("/").status_code == 403
    assert client.get("/tasks/1/").status_code == 403


def test_the_panel_shows_markdown_sanitised_history_session_and_tool_calls(po_client):
    session = SessionFactory(id="sess-panel")
    task = TaskFactory(
        title="Panel",
        description="# Plan\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1))",
        session=session,
    )
    Event.objects.create(name="task.moved", subject_type="task", subject_id=str(task.pk), actor="user:po")
    ToolCallFactory(session=session, tool_name="Bash", input_summary="ls -la")

    response = po_client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "<h1>Plan</h1>" in html and "<strong>bold</strong>" in html
    # The edit part holds the source as text (escaped); nothing of it is a script or a link.
    assert "<script>" not in html and 'href="javascript:' not in html
    shown = html[html.index('aria-labelledby="d-desc"') :]
    assert "javascript:" not in shown[: shown.index("</section>")]
    assert "task.moved" in html and "user:po" in html
    # a product owner may not open the session page: its id, not a link that answers 403
    assert 'href="/sessions/' not in html
    assert '<span class="mono">sess-panel</span>' in html
    assert "Bash" in html and "ls -la" in html


def test_an_engineer_gets_the_panels_link_to_the_session_page(client, db):
    # given an engineer and a task a session works on
    from config.pages import ENGINEERS
    from tests.page_users import user_in

    client.force_login(user_in(ENGINEERS, username="eng"))
    task = TaskFactory(title="Linked", session=SessionFactory(id="sess-linked"))

    # when the panel opens
    html = client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()

    # then the session id links to its page, which this person may open
    assert '<a href="/sessions/sess-linked/">sess-linked</a>' in html
    assert client.get("/sessions/sess-linked/").status_code == 200


def test_the_panel_says_how_long_ago_in_words(po_client):
    # given a task made this minute and one made five minutes ago
    fresh = TaskFactory(title="Fresh")
    older = TaskFactory(title="Older")
    Task.objects.filter(pk=older.pk).update(created_at=timezone.now() - timezone.timedelta(minutes=5, seconds=3))

    # when their panels open
    fresh_html = po_client.get(f"/tasks/{fresh.pk}/", HTTP_HX_REQUEST="true").content.decode()
    older_html = po_client.get(f"/tasks/{older.pk}/", HTTP_HX_REQUEST="true").content.decode()

    # then "just now" and "5m ago", never "now ago"
    assert "</time> (just now)</dd>" in fresh_html
    assert "now ago" not in fresh_html
    assert "</time> (5m ago)</dd>" in older_html


def test_the_panel_without_htmx_is_a_whole_page_and_a_missing_task_is_404(po_client):
    task = TaskFactory(title="Alone", finished_at=timezone.now())
    assert "<!doctype html>" in po_client.get(f"/tasks/{task.pk}/").content.decode()
    assert po_client.get("/tasks/999999/").status_code == 404
