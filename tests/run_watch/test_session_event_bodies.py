"""The session page shows diff events as a diff and plan events as a checklist, not their JSON;
what the agent wrote in them escaped."""

import pytest

from config.pages import ENGINEERS
from sessions_app.event_bodies import plan_steps
from sessions_app.models import StreamEvent
from tests.factories import SessionFactory, StreamEventFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

DIFF = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
-print("<b>old</b>")
+print("<script>alert(1)</script>")
 keep = True
"""


@pytest.fixture
def engineer_client(client):
    client.force_login(user_in(ENGINEERS, username="eng"))
    return client


def _page(client, session) -> str:
    response = client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_diff_event_reads_as_a_highlighted_diff(engineer_client):
    session = SessionFactory()
    StreamEventFactory(session=session, seq=1, type=StreamEvent.Type.DIFF, payload={"diff": DIFF, "path": "app.py"})

    html = _page(engineer_client, session)

    assert '<pre class="diff-view highlight">' in html
    assert '<span class="hl-gd">-print("&lt;b&gt;old&lt;/b&gt;")' in html
    assert '<span class="hl-gi">+print("&lt;script&gt;alert(1)&lt;/script&gt;")' in html
    assert "<script>alert(1)" not in html
    assert '"diff":' not in html  # not its JSON


def test_the_demo_agents_diff_event_shows_its_commit_and_stat(engineer_client):
    session = SessionFactory()
    stat = " NOTES-task-3.md | 12 ++++++++++++\n 1 file changed, 12 insertions(+)"
    StreamEventFactory(
        session=session, seq=1, type=StreamEvent.Type.DIFF, payload={"commit": "a1b2c3d4e5f6a7b8", "stat": stat}
    )

    html = _page(engineer_client, session)

    assert 'Commit <span class="mono">a1b2c3d4e5f6</span>' in html
    assert '<pre class="diff-stat"> NOTES-task-3.md | 12 ++++++++++++' in html


def test_a_plan_event_reads_as_a_checklist(engineer_client):
    session = SessionFactory()
    todos = [
        {"content": "Read the code", "status": "completed"},
        {"content": "Fix <em>it</em>", "status": "in_progress"},
        {"content": "Write tests", "status": "pending"},
    ]
    StreamEventFactory(session=session, seq=1, type=StreamEvent.Type.PLAN_UPDATE, payload={"todos": todos})

    html = _page(engineer_client, session)

    assert '<ul class="checklist" aria-label="Plan">' in html
    assert '<li class="step-completed"><span class="check" aria-hidden="true">&#9745;</span>' in html
    assert "in_progress:</span>Fix &lt;em&gt;it&lt;/em&gt;</li>" in html
    assert "pending:</span>Write tests</li>" in html
    assert '"todos"' not in html


def test_plan_shapes_agents_send():
    assert plan_steps({"plan": ["Read", "Write"]}) == [("Read", "pending"), ("Write", "pending")]
    assert plan_steps({"steps": [{"text": "Ship", "completed": True}]}) == [("Ship", "completed")]
    assert plan_steps({"hook": "TaskCompleted", "task_subject": "Deploy", "status": "completed"}) == [
        ("Deploy", "completed")
    ]
    assert plan_steps({"something": "else"}) == []
