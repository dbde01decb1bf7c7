"""Which workspaces are due for archival, exactly; and the periodic task and the command."""

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from board.models import Task
from sessions_app.models import AgentSession
from tests.factories import AgentFactory, SessionFactory, TaskFactory
from tests.workspaces.archive_support import (
    age,
    archive_storage_fixture,  # noqa: F401 - autouse: storages["archives"] in ARCHIVE_ROOT
    ended_session_workspace,
    queued_tasks_fixture,  # noqa: F401 - the queued_tasks fixture
)
from workspaces.archive.selectors import workspaces_due_for_archive
from workspaces.files.services import workspace_shared
from workspaces.models import Repository, Workspace, Worktree, WorktreeClaimRequest
from workspaces.tasks import workspaces_archive_due_task

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def test_session_workspaces_are_due_after_their_retention(settings):
    # given ARCHIVE_AFTER_DAYS = 14 and per-workspace overrides
    settings.ARCHIVE_AFTER_DAYS = 14
    old = ended_session_workspace(days_ago=15)
    recent = ended_session_workspace(days_ago=13)
    short_override = ended_session_workspace(days_ago=4, retention_days=3)
    long_override = ended_session_workspace(days_ago=20, retention_days=30)
    zero_override = ended_session_workspace(days_ago=0.01, retention_days=0)
    one_still_open = ended_session_workspace(days_ago=40)
    SessionFactory(workspace=one_still_open, status=AgentSession.Status.RUNNING)
    age(one_still_open, days=40)
    no_sessions = ended_session_workspace(days_ago=40)
    no_sessions.sessions.update(workspace=None)
    restored_lately = ended_session_workspace(days_ago=40)
    age(restored_lately, days=2)  # a restore moves updated_at: kept for another retention
    already_archived = ended_session_workspace(days_ago=40)
    Workspace.objects.filter(pk=already_archived.pk).update(status=Workspace.Status.ARCHIVED)
    shared = workspace_shared()
    SessionFactory(workspace=shared, status=AgentSession.Status.COMPLETED, ended_at=timezone.now() - 40 * DAY)
    age(shared, days=40)

    # when
    due = workspaces_due_for_archive()

    # then exactly these: not the recent one, the long override, the one with an open session, the
    # one without sessions, the lately restored one, the archived one or the shared workspace
    assert due == sorted([old.pk, short_override.pk, zero_override.pk])
    not_due = {recent, long_override, one_still_open, no_sessions, restored_lately, already_archived, shared}
    assert {w.pk for w in not_due}.isdisjoint(due)


def test_a_workspace_a_killed_run_left_verified_is_due_whatever_its_age():
    half_done = ended_session_workspace(days_ago=1)
    Workspace.objects.filter(pk=half_done.pk).update(archive_verified_at=timezone.now())

    assert workspaces_due_for_archive() == [half_done.pk]


@pytest.fixture
def repository(tmp_path):
    return Repository.objects.create(name="app", path=str(tmp_path / "code" / "app"))


def _worktree(repository, tmp_path, name: str, **fields) -> Worktree:
    workspace = Workspace.objects.create(
        kind=Workspace.Kind.WORKTREE, root_path=str(tmp_path / "code" / f"feat-{name}")
    )
    age(workspace, days=60)
    return Worktree.objects.create(
        repository=repository,
        type="feat",
        name=name,
        branch=f"feat-{name}",
        real_path=workspace.root_path,
        workspace=workspace,
        **fields,
    )


def _task_on(worktree: Worktree, *, status=Task.Status.DONE, finished_days_ago=30, via="branch", repo=None, **session):
    """A task whose session worked on the worktree: by branch and repository, or in its workspace."""
    link = {"workspace": worktree.workspace} if via == "workspace" else {"branch": worktree.branch}
    if via == "branch":
        link["repo"] = repo if repo is not None else worktree.repository.name
    ended = timezone.now() - finished_days_ago * DAY
    session = SessionFactory(status=AgentSession.Status.COMPLETED, ended_at=ended, **{**link, **session})
    finished = ended if status == Task.Status.DONE else None
    return TaskFactory(status=status, session=session, finished_at=finished)


def test_worktree_workspaces_are_due_when_their_tasks_are_done(repository, tmp_path, settings):
    settings.ARCHIVE_AFTER_DAYS = 14
    done = _worktree(repository, tmp_path, "done")
    _task_on(done)
    _task_on(done, finished_days_ago=20)
    by_path = _worktree(repository, tmp_path, "by-path")
    _task_on(by_path, repo=repository.path)
    in_workspace = _worktree(repository, tmp_path, "in-workspace")
    _task_on(in_workspace, via="workspace")
    one_not_done = _worktree(repository, tmp_path, "not-done")
    _task_on(one_not_done)
    _task_on(one_not_done, status=Task.Status.REVIEW)
    done_lately = _worktree(repository, tmp_path, "lately")
    _task_on(done_lately, finished_days_ago=3)
    _worktree(repository, tmp_path, "no-tasks")
    other_repo = _worktree(repository, tmp_path, "other-repo")
    _task_on(other_repo, repo="someone-elses-repo")
    held = _worktree(
        repository, tmp_path, "held", holder=AgentFactory(slug="holder"), lease_expires_at=timezone.now() + DAY
    )
    _task_on(held)
    queued = _worktree(repository, tmp_path, "queued")
    _task_on(queued)
    WorktreeClaimRequest.objects.create(worktree=queued, agent=AgentFactory(slug="waiter"))
    open_session = _worktree(repository, tmp_path, "open-session")
    _task_on(open_session)
    SessionFactory(branch=open_session.branch, repo=repository.name, status=AgentSession.Status.RUNNING)
    removed = _worktree(repository, tmp_path, "removed", status=Worktree.Status.REMOVED)
    _task_on(removed)

    due = workspaces_due_for_archive()

    assert due == sorted([done.workspace_id, by_path.workspace_id, in_workspace.workspace_id])


def test_the_periodic_task_queues_exactly_the_due_ones(queued_tasks, django_capture_on_commit_callbacks):
    due = ended_session_workspace(days_ago=30)
    ended_session_workspace(days_ago=1)

    with django_capture_on_commit_callbacks(execute=True):
        result = workspaces_archive_due_task()

    assert result == {"due": 1, "queued": 1}
    assert queued_tasks == [("workspace_archive_task", (due.pk,), {})]


# --- manage.py archive_workspaces -----------------------------------------------------------------


def test_the_command_lists_then_archives_what_is_due():
    due = ended_session_workspace(days_ago=30)
    not_due = ended_session_workspace(days_ago=1)
    dry, out = StringIO(), StringIO()

    call_command("archive_workspaces", "--dry-run", stdout=dry)
    assert Workspace.objects.get(pk=due.pk).status == "active"
    call_command("archive_workspaces", stdout=out)

    assert dry.getvalue() == f"[1/1] workspace {due.pk} (session) {due.root_path}: would be archived\n"
    lines = out.getvalue().splitlines()
    assert lines[0] == f"[1/1] workspace {due.pk} (session) {due.root_path}: archiving"
    assert lines[1].startswith("  archived and verified in ") and lines[1].endswith("; folder deleted")
    assert dict(Workspace.objects.values_list("pk", "status")) == {due.pk: "archived", not_due.pk: "active"}
    assert not Path(due.root_path).exists()


def test_the_command_archives_a_named_workspace_now_and_reports_refusals():
    recent = ended_session_workspace(days_ago=1)
    shared = workspace_shared()
    out, err = StringIO(), StringIO()

    with pytest.raises(CommandError, match="1 of 2 workspace"):
        call_command(
            "archive_workspaces", "--workspace", str(recent.pk), "--workspace", str(shared.pk), stdout=out, stderr=err
        )

    assert Workspace.objects.get(pk=recent.pk).status == "archived"
    assert "  refused: The shared workspace is never archived." in out.getvalue()


def test_the_command_says_when_nothing_is_due():
    out = StringIO()

    call_command("archive_workspaces", stdout=out)

    assert out.getvalue() == "No workspace is due for archival.\n"
