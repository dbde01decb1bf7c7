"""The admin of sync issues and synced files: read-only pages, filters, and "Retry sync"."""

import pytest
from django.urls import reverse

from board.models import SyncedFile, SyncIssue, Task
from board.sync import state_sync
from tests.board.test_sync_service import SESSION, snapshot, write_file

pytestmark = pytest.mark.django_db
ISSUES = reverse("admin:board_syncissue_changelist")
FILES = reverse("admin:board_syncedfile_changelist")


@pytest.fixture
def broken():
    path = write_file(f"{SESSION}/backend.json", "{")
    write_file("session-other/qa.json", "[]")
    snapshot("frontend", {"task": "B", "status": "running"})
    state_sync()
    return path


def test_issue_and_file_pages_render_with_filters(admin_client, broken):
    issue = SyncIssue.objects.get(path=f"{SESSION}/backend.json")

    changelist = admin_client.get(ISSUES, {"state": "open"})
    change = admin_client.get(reverse("admin:board_syncissue_change", args=[issue.pk]))
    files = admin_client.get(FILES, {"source__exact": "state"})

    assert changelist.status_code == 200
    assert {i.path for i in changelist.context["cl"].result_list} == {
        f"{SESSION}/backend.json",
        "session-other/qa.json",
    }
    assert change.status_code == 200
    assert change.context["has_change_permission"] is False
    assert [f.path for f in files.context["cl"].result_list] == [f"{SESSION}/frontend.json"]
    assert admin_client.get(ISSUES, {"state": "resolved"}).context["cl"].result_count == 0


def test_issues_and_synced_files_cannot_be_added_edited_or_deleted(admin_client, broken):
    issue = SyncIssue.objects.first()
    before = (list(SyncIssue.objects.values()), list(SyncedFile.objects.values()))

    assert admin_client.get(reverse("admin:board_syncissue_add")).status_code == 403
    assert admin_client.post(reverse("admin:board_syncissue_change", args=[issue.pk]), {}).status_code == 403
    assert (
        admin_client.post(reverse("admin:board_syncissue_delete", args=[issue.pk]), {"post": "yes"}).status_code == 403
    )
    assert admin_client.get(reverse("admin:board_syncedfile_add")).status_code == 403
    assert (list(SyncIssue.objects.values()), list(SyncedFile.objects.values())) == before


def test_retry_sync_runs_the_sessions_of_the_selected_issues(admin_client, broken):
    # given the broken file is fixed
    broken.write_text('{"task": "Build", "status": "running"}')
    issue = SyncIssue.objects.get(path=f"{SESSION}/backend.json")
    other = SyncIssue.objects.get(path="session-other/qa.json")

    # when
    response = admin_client.post(ISSUES, {"action": "retry_sync", "_selected_action": [issue.pk]}, follow=True)

    # then that session was synced and its issue resolved; the other session was not touched
    assert response.status_code == 200
    assert "Synced 1 session(s): 1 issue(s) resolved, 0 still failing." in response.content.decode()
    issue.refresh_from_db()
    other.refresh_from_db()
    assert issue.resolved_at is not None
    assert (other.resolved_at, other.occurrences) == (None, 1)
    assert Task.objects.filter(external_id=f"task-{SESSION}-backend", status="in_progress").exists()


@pytest.mark.parametrize("url", [ISSUES, FILES])
def test_changelists_cost_the_same_queries_for_1_row_as_for_30(admin_client, django_assert_num_queries, url):
    write_file("session-0/backend.json", "{")
    snapshot("qa", {"task": "A"}, session="session-0")
    state_sync()
    admin_client.get(url)  # warm the per-process caches
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one:
        admin_client.get(url)
    for n in range(1, 30):
        write_file(f"session-{n}/backend.json", "{")
        snapshot("qa", {"task": "A"}, session=f"session-{n}")
    state_sync()

    with django_assert_num_queries(len(one)):
        response = admin_client.get(url)
    assert response.context["cl"].result_count == 30
