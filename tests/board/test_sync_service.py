"""state_sync: sessions, agents and tasks from STATE_DIR; job-log failures; broken files; skipping."""

import itertools
import json
import os
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board.models import SyncedFile, SyncIssue, Task
from board.sync import service, state_sync
from ledger.models import Event
from sessions_app.models import Agent, AgentSession
from tests.factories import AgentFactory, SessionFactory

pytestmark = pytest.mark.django_db

SESSION = "session-1770537842"
ORCHESTRATOR = {
    "team": "engineering",
    "targetRepo": "acme/api",
    "branchName": "feat/login",
    "priorityFile": "reports/priorities-2026-02-08.md",
    "status": "running",
    "startedAt": "2026-02-08T07:57:22.593Z",
}
_ticks = itertools.count()


def write_file(relative: str, text: str | bytes, *, age: float = 600, root: Path | None = None) -> Path:
    """Write a file under STATE_DIR. Its mtime is ``age`` seconds ago and distinct from every
    other file's, so a rewrite is always seen as a change (the kernel's tick is coarse)."""
    path = (root or Path(settings.STATE_DIR)) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    stamp = time.time() - age + next(_ticks) * 0.001
    os.utime(path, (stamp, stamp))
    return path


def snapshot(agent: str, data: dict | list, *, session: str = SESSION, age: float = 600) -> Path:
    return write_file(f"{session}/{agent}.json", json.dumps(data), age=age)


def job_log(name: str, text: str, *, age: float = 600) -> Path:
    return write_file(f"running-jobs/{name}", text, age=age, root=Path(settings.LOGS_ROOT))


def task_of(agent: str, session: str = SESSION) -> Task:
    return Task.objects.select_related("assignee").get(external_id=f"task-{session}-{agent}")


def tasks_state() -> set[tuple]:
    return set(
        Task.objects.values_list("external_id", "status", "priority", "title", "error", "assignee__slug", "session_id")
    )


def open_issue(path: str) -> SyncIssue:
    return SyncIssue.objects.get(path=path, resolved_at__isnull=True)


def event_names() -> list[str]:
    return sorted(Event.objects.values_list("name", flat=True))


# --- What a run makes -------------------------------------------------------------------------


def test_a_session_folder_becomes_a_session_its_agents_and_their_tasks():
    # given
    snapshot("orchestrator", ORCHESTRATOR)
    snapshot(
        "backend",
        {
            "task": "Build the login API",
            "status": "completed",
            "priority": "high",
            "llm_used": "claude",
            "startedAt": "2026-02-08T08:00:00Z",
            "completedAt": "2026-02-08T09:30:00Z",
        },
    )
    snapshot("frontend", {"description": "Login page\nWith a remember-me box", "status": "in_progress"})

    # when
    report = state_sync()

    # then
    session = AgentSession.objects.get(pk=SESSION)
    assert (session.agent.slug, session.status, session.repo, session.branch) == (
        "orchestrator",
        "running",
        "acme/api",
        "feat/login",
    )
    assert session.metadata == {
        "source": "state_sync",
        "team": "engineering",
        "priority_file": "reports/priorities-2026-02-08.md",
    }
    assert session.started_at.isoformat() == "2026-02-08T07:57:22.593000+00:00"
    assert session.ended_at is None
    backend = task_of("backend")
    assert (backend.title, backend.status, backend.priority, backend.assignee.slug, backend.session_id) == (
        "Build the login API",
        "done",
        "P1",
        "backend",
        SESSION,
    )
    assert backend.labels == ["llm:claude"]
    assert backend.suggested_agent == "backend"
    assert backend.source_file == f"{SESSION}/backend.json"
    assert backend.finished_at.isoformat() == "2026-02-08T09:30:00+00:00"
    frontend = task_of("frontend")
    assert (frontend.title, frontend.description, frontend.status) == (
        "Login page",
        "Login page\nWith a remember-me box",
        "in_progress",
    )
    assert set(Agent.objects.values_list("slug", flat=True)) == {"orchestrator", "backend", "frontend"}
    assert (report.files, report.synced, report.tasks_created, report.sessions_created, report.agents_created) == (
        3,
        3,
        2,
        1,
        3,
    )
    assert event_names() == ["session.started", "sync.completed", "task.created", "task.created"]
    completed = Event.objects.get(name="sync.completed")
    assert completed.payload["tasks_created"] == 2
    assert completed.subject_id == "all"


@pytest.mark.parametrize(
    ("word", "status"),
    [
        ("in_progress", "in_progress"),
        ("running", "in_progress"),
        ("completed", "done"),
        ("success", "done"),
        ("failed", "failed"),
        ("error", "failed"),
        ("blocked", "blocked"),
        ("pending", "ready"),
        ("waiting", "ready"),
        ("In-Progress", "in_progress"),
        ("COMPLETED", "done"),
    ],
)
def test_each_status_word_maps_to_its_column(word, status):
    snapshot("backend", {"task": "Work", "status": word})

    state_sync()

    assert task_of("backend").status == status
    assert not SyncIssue.objects.exists()


@pytest.mark.parametrize(
    ("word", "status"),
    [("pending", "planning"), ("running", "running"), ("completed", "completed"), ("error", "failed")],
)
def test_the_orchestrator_status_is_the_session_status(word, status):
    snapshot("orchestrator", {**ORCHESTRATOR, "status": word})

    state_sync()

    session = AgentSession.objects.get(pk=SESSION)
    assert session.status == status
    assert (session.ended_at is not None) == (status in ("completed", "failed"))


def test_an_unknown_status_word_keeps_the_previous_status_and_is_reported():
    # given a synced task
    snapshot("backend", {"task": "Work", "status": "running"})
    state_sync()

    # when its file says a word outside the spec
    snapshot("backend", {"task": "Work, renamed", "status": "paused-ish"})
    report = state_sync()

    # then the status stays, the rest is applied, and the file has an issue
    task = task_of("backend")
    assert (task.status, task.title) == ("in_progress", "Work, renamed")
    assert report.kept == [
        {
            "path": f"{SESSION}/backend.json",
            "problem": "unknown status 'paused-ish'; the task keeps its previous status",
        }
    ]
    assert "paused-ish" in open_issue(f"{SESSION}/backend.json").error


def test_a_new_task_with_an_unknown_status_starts_in_backlog():
    snapshot("backend", {"task": "Work", "status": "mystery"})

    state_sync()

    assert task_of("backend").status == "backlog"


def test_unknown_agents_are_created_not_skipped():
    AgentFactory(slug="backend")
    snapshot("backend", {"task": "A", "status": "running"})
    snapshot("data-wrangler_2", {"task": "B", "status": "running"})
    snapshot("Marketing", {"task": "C", "status": "running"})

    report = state_sync()

    assert set(Agent.objects.values_list("slug", flat=True)) == {
        "backend",
        "data-wrangler_2",
        "marketing",
        "orchestrator",
    }
    assert report.agents_created == 3
    assert task_of("marketing").assignee.slug == "marketing"


def test_a_session_without_orchestrator_json_still_gets_a_session():
    snapshot("backend", {"task": "A", "status": "running"})

    state_sync()

    session = AgentSession.objects.get(pk=SESSION)
    assert (session.agent.slug, session.status, session.metadata) == (
        "orchestrator",
        "planning",
        {"source": "state_sync"},
    )


def test_session_json_and_files_that_are_not_ours_are_ignored():
    snapshot("session", {"anything": True})
    write_file(f"{SESSION}/notes.txt", "hello")
    write_file(f"{SESSION}/backend.json.tmp", "{")
    write_file("agent-service.db", "SQLite format 3")
    write_file("other-folder/backend.json", "{}")

    report = state_sync()

    assert report.files == 0
    assert not Task.objects.exists()
    assert not SyncIssue.objects.exists()


# --- Job logs ---------------------------------------------------------------------------------

JOB_LOG = f"""[07:57:22] Orchestrator starting; state in .compound-state/{SESSION}
[07:57:23] 🚀 Spawning backend specialist...
[07:57:23]    backend specialist spawned (PID: 4242)
[07:57:24] 🚀 Spawning qa specialist...
[07:57:24]    spawned (PID: 4243)
[07:57:25] Spawning security specialist...
[07:57:25]    spawned (PID: 4244)
[08:10:00] ❌ Specialist 4242 failed (exit code: 1)
[08:10:01] ❌ Specialist 4243 failed (exit code: 137)
[08:10:02] ❌ Specialist 9999 failed (exit code: 1)
"""


def test_a_failed_specialist_with_no_state_file_becomes_a_failed_task():
    # given backend has a state file, qa failed without one, security never failed
    snapshot("backend", {"task": "Build the API", "status": "running"})
    job_log("job-1770537842593-mfn5pu4.log", JOB_LOG)
    write_file("running-jobs/job-1770537842593-mfn5pu4.json", "{}", root=Path(settings.LOGS_ROOT))

    # when
    report = state_sync()

    # then
    qa = task_of("qa")
    assert (qa.status, qa.error, qa.assignee.slug, qa.session_id) == (
        "failed",
        "Specialist 4243 failed (exit code: 137)",
        "qa",
        SESSION,
    )
    assert task_of("backend").status == "in_progress"  # its state file wins over the log
    assert not Task.objects.filter(external_id__endswith="-security").exists()
    assert report.tasks_failed_from_logs == 1
    assert AgentSession.objects.filter(pk=SESSION).exists()
    assert SyncedFile.objects.filter(path="running-jobs/job-1770537842593-mfn5pu4.log").exists()


def test_a_job_log_is_read_again_only_when_it_grows():
    log = job_log("job-1.log", JOB_LOG)
    state_sync()

    assert state_sync().job_logs_read == 0

    with open(log, "a") as handle:
        handle.write("Spawning docs specialist...\n spawned (PID: 77)\nSpecialist 77 failed (exit code: 3)\n")
    report = state_sync()

    assert report.job_logs_read == 1
    assert task_of("docs").error == "Specialist 77 failed (exit code: 3)"
    assert report.tasks_created == 1


def test_the_session_a_spawn_belongs_to_is_the_last_one_named_before_it():
    job_log(
        "job-2.log",
        "Session: session-aaa\nSpawning backend specialist...\nspawned (PID: 1)\n"
        "Session: session-bbb\nSpawning backend specialist...\nspawned (PID: 2)\n"
        "Specialist 2 failed (exit code: 1)\n",
    )

    state_sync()

    assert list(Task.objects.values_list("external_id", flat=True)) == ["task-session-bbb-backend"]


def test_a_one_session_sync_applies_only_that_sessions_failures_and_reads_the_log_again_later():
    job_log(
        "job-3.log",
        "session-aaa\nSpawning qa specialist...\nspawned (PID: 1)\nSpecialist 1 failed (exit code: 1)\n"
        "session-bbb\nSpawning qa specialist...\nspawned (PID: 2)\nSpecialist 2 failed (exit code: 1)\n",
    )

    state_sync(session_key="session-aaa")

    assert list(Task.objects.values_list("external_id", flat=True)) == ["task-session-aaa-qa"]
    assert not SyncedFile.objects.exists()  # the log still has session-bbb's failure to give
    state_sync()
    assert set(Task.objects.values_list("external_id", flat=True)) == {"task-session-aaa-qa", "task-session-bbb-qa"}


# --- Broken files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"task": "Build", "status": ', "not valid JSON"),
        ("", "the file is empty"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('{"task": 42}', "'task' must be a string, got a number"),
        ('{"task": "A", "status": ["running"]}', "'status' must be a string, got a list"),
        ('{"task": "A", "priority": {"level": 1}}', "'priority' must be a string"),
        ('{"task": "A", "startedAt": "yesterday"}', "'startedAt' is not an ISO 8601 timestamp"),
        ('{"task": "A", "retries": -1}', "'retries' must be a non-negative integer"),
        ('{"task": "A\\u0000B"}', "'task' contains a NUL character"),
        ('{"task": "\\ud800"}', "unpaired surrogate"),
        (b'{"task": "\xff\xfe"}', "not UTF-8"),
    ],
)
def test_an_old_broken_file_becomes_an_issue_and_never_stops_the_run(content, error):
    # given a broken file beside a good one
    write_file(f"{SESSION}/backend.json", content)
    snapshot("frontend", {"task": "Page", "status": "running"})

    # when
    report = state_sync()

    # then the good one is synced and the broken one is an issue
    assert task_of("frontend").status == "in_progress"
    assert not Task.objects.filter(external_id=f"task-{SESSION}-backend").exists()
    issue = open_issue(f"{SESSION}/backend.json")
    assert error in issue.error
    assert (issue.occurrences, issue.session_key, issue.source) == (1, SESSION, "state")
    assert issue.first_seen_at == issue.last_seen_at
    assert report.issues_opened == 1
    assert Event.objects.filter(name="sync.issue", subject_id=str(issue.pk)).count() == 1


def test_a_broken_file_is_seen_again_each_run_then_resolved_when_fixed():
    # given
    broken = write_file(f"{SESSION}/backend.json", "{not json")
    state_sync()
    first = open_issue(f"{SESSION}/backend.json")

    # when it is still broken on the next runs
    state_sync()
    report = state_sync()

    # then the same issue counts them
    again = open_issue(f"{SESSION}/backend.json")
    assert (again.pk, again.occurrences, again.first_seen_at) == (first.pk, 3, first.first_seen_at)
    assert again.last_seen_at > first.last_seen_at
    assert report.issues_seen_again == 1
    assert Event.objects.filter(name="sync.issue").count() == 1  # opened once
    assert not Event.objects.filter(name="sync.completed").exclude(payload__issues_opened=1).exists()

    # when fixed
    broken.unlink()
    snapshot("backend", {"task": "Build", "status": "running"})
    report = state_sync()

    # then
    issue = SyncIssue.objects.get(pk=first.pk)
    assert issue.resolved_at is not None
    assert report.issues_resolved == 1
    assert task_of("backend").status == "in_progress"


def test_an_issue_of_a_file_that_is_removed_is_resolved():
    broken = write_file(f"{SESSION}/backend.json", "{")
    state_sync()

    broken.unlink()
    state_sync()

    assert SyncIssue.objects.get().resolved_at is not None


def test_a_young_file_that_does_not_parse_is_half_written_and_retried_without_an_issue(settings):
    # given a file being written right now
    settings.SYNC_SETTLE_SECONDS = 30
    path = write_file(f"{SESSION}/backend.json", '{"task": "Build", "sta', age=0)

    # when
    report = state_sync()

    # then nothing is recorded about it
    assert report.deferred == 1
    assert not SyncIssue.objects.exists()
    assert not SyncedFile.objects.exists()
    assert not Task.objects.exists()

    # when the writer finishes, the next run applies it
    path.write_text('{"task": "Build", "status": "running"}')
    report = state_sync()
    assert (report.deferred, task_of("backend").status) == (0, "in_progress")
    assert not SyncIssue.objects.exists()


def test_a_young_file_with_valid_json_but_wrong_types_is_an_issue_at_once(settings):
    settings.SYNC_SETTLE_SECONDS = 30
    write_file(f"{SESSION}/backend.json", '{"task": 1}', age=0)

    state_sync()

    assert "'task' must be a string" in open_issue(f"{SESSION}/backend.json").error


def test_a_broken_file_never_blanks_what_the_database_holds():
    # given a synced session and task
    snapshot("orchestrator", ORCHESTRATOR)
    snapshot("backend", {"task": "Build", "status": "completed", "priority": "P0", "error": "flaky once"})
    state_sync()
    before_tasks = tasks_state()
    before_session = AgentSession.objects.values().get(pk=SESSION)

    # when both files turn into garbage, one half-written, one with wrong types
    write_file(f"{SESSION}/orchestrator.json", '{"team": "engineering", "targ')
    write_file(f"{SESSION}/backend.json", '{"task": null, "status": 3}')
    state_sync()

    # then the database still holds what it had
    assert tasks_state() == before_tasks
    assert AgentSession.objects.values().get(pk=SESSION) == before_session
    assert SyncIssue.objects.filter(resolved_at__isnull=True).count() == 2


def test_absent_and_null_fields_keep_their_values():
    snapshot("backend", {"task": "Build", "status": "failed", "priority": "P0", "error": "boom", "llm_used": "gpt"})
    state_sync()

    snapshot("backend", {"task": None, "status": "failed", "error": None})
    state_sync()

    task = task_of("backend")
    assert (task.title, task.priority, task.error, task.labels) == ("Build", "P0", "boom", ["llm:gpt"])


@pytest.mark.parametrize("name", ["bad name.json", "x" * 70 + ".json", ".hidden.json"])
def test_file_names_that_are_not_agent_names_are_issues_or_ignored(name):
    write_file(f"{SESSION}/{name}", '{"task": "A"}')

    state_sync()

    assert not Task.objects.exists()
    if name.startswith("."):
        assert not SyncIssue.objects.exists()
    else:
        assert "not an agent name" in SyncIssue.objects.get().error


def test_symlinks_are_never_followed(tmp_path):
    outside = tmp_path / "secret.json"
    outside.write_text('{"task": "Stolen", "status": "running"}')
    Path(settings.STATE_DIR, SESSION).mkdir(parents=True)
    Path(settings.STATE_DIR, SESSION, "backend.json").symlink_to(outside)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "backend.json").write_text('{"task": "Stolen"}')
    Path(settings.STATE_DIR, "session-linked").symlink_to(tmp_path / "elsewhere")

    state_sync()

    assert not Task.objects.exists()
    assert set(SyncIssue.objects.values_list("path", "error")) == {
        (f"{SESSION}/backend.json", "a symbolic link; not followed"),
        ("session-linked", "the session folder is a symbolic link; not followed"),
    }


def test_a_session_folder_with_an_unsafe_name_is_an_issue():
    write_file("session-a.b/backend.json", '{"task": "A"}')

    state_sync()

    assert not Task.objects.exists()
    assert SyncIssue.objects.get().path == "session-a.b"


def test_a_session_opened_through_the_api_with_the_same_id_is_left_alone():
    api_session = SessionFactory(id=SESSION, agent=AgentFactory(slug="claude-1"), repo="mine")
    snapshot("orchestrator", ORCHESTRATOR)
    snapshot("backend", {"task": "A", "status": "running"})

    state_sync()

    api_session.refresh_from_db()
    assert (api_session.agent.slug, api_session.repo) == ("claude-1", "mine")
    assert not Task.objects.exists()
    assert SyncIssue.objects.filter(resolved_at__isnull=True).count() == 2


def test_a_finished_session_is_not_reopened_by_its_file():
    snapshot("orchestrator", {**ORCHESTRATOR, "status": "completed", "completedAt": "2026-02-08T10:00:00Z"})
    state_sync()

    snapshot("orchestrator", {**ORCHESTRATOR, "status": "running"})
    state_sync()

    session = AgentSession.objects.get(pk=SESSION)
    assert (session.status, session.ended_at.isoformat()) == ("completed", "2026-02-08T10:00:00+00:00")
    assert "final" in open_issue(f"{SESSION}/orchestrator.json").error


# --- Changes, skipping and idempotence ----------------------------------------------------------


def test_a_status_change_moves_the_task_and_records_task_moved():
    snapshot("backend", {"task": "Build", "status": "running"})
    state_sync()

    snapshot("backend", {"task": "Build", "status": "success"})
    report = state_sync()

    assert task_of("backend").status == "done"
    assert report.tasks_moved == 1
    moved = Event.objects.get(name="task.moved")
    assert (moved.payload["from"], moved.payload["to"]) == ("in_progress", "done")


def test_running_twice_changes_nothing_the_second_time():
    snapshot("orchestrator", ORCHESTRATOR)
    snapshot("backend", {"task": "Build", "status": "running"})
    job_log("job-1.log", JOB_LOG)
    state_sync()
    before = (tasks_state(), list(AgentSession.objects.values()), event_names(), list(SyncedFile.objects.values()))

    report = state_sync()

    assert (
        tasks_state(),
        list(AgentSession.objects.values()),
        event_names(),
        list(SyncedFile.objects.values()),
    ) == before
    assert (report.unchanged, report.read, report.changed) == (2, 0, False)


def test_unchanged_files_cost_two_queries_and_no_write():
    # given 30 synced files
    for n in range(10):
        snapshot("orchestrator", ORCHESTRATOR, session=f"session-{n}")
        snapshot("backend", {"task": "A", "status": "running"}, session=f"session-{n}")
        snapshot("frontend", {"task": "B", "status": "completed"}, session=f"session-{n}")
    state_sync()

    # when / then: the signatures, the open issues, nothing else
    with CaptureQueriesContext(connection) as queries:
        report = state_sync()
    assert len(queries) == 2, [q["sql"] for q in queries]
    assert all(q["sql"].lstrip().upper().startswith("SELECT") for q in queries)
    assert (report.files, report.unchanged) == (30, 30)


def test_a_file_touched_without_change_is_not_applied_again():
    # given a synced file whose task a person then moved by hand
    path = snapshot("backend", {"task": "Build", "status": "running"})
    state_sync()
    Task.objects.filter(external_id=f"task-{SESSION}-backend").update(status="review")

    # when the file is touched (same bytes, new mtime)
    os.utime(path, (time.time() - 100, time.time() - 100))
    report = state_sync()

    # then only its signature is refreshed
    assert (report.rechecked, report.synced, report.changed) == (1, 0, False)
    assert task_of("backend").status == "review"
    assert SyncedFile.objects.get().mtime_ns == path.stat().st_mtime_ns


def test_force_applies_unchanged_files_again():
    snapshot("backend", {"task": "Build", "status": "running"})
    state_sync()
    Task.objects.filter(external_id=f"task-{SESSION}-backend").update(status="review")

    state_sync(force=True)

    assert task_of("backend").status == "in_progress"


def test_a_file_changed_in_the_same_tick_it_was_synced_is_read_again():
    # given a file synced right after it was written (mtime within RACY_NS of the sync)
    path = snapshot("backend", {"task": "Build", "status": "running"}, age=0)
    state_sync()
    stamp = path.stat().st_mtime_ns

    # when rewritten with the same size and, as on a coarse clock, the same mtime
    path.write_text(json.dumps({"task": "Build", "status": "blocked"}))
    os.utime(path, ns=(stamp, stamp))
    state_sync()

    # then the change is not missed
    assert task_of("backend").status == "blocked"


def test_a_run_killed_between_batches_ends_where_one_clean_run_does(monkeypatch):
    # given 12 sessions, synced in batches of about 6 files
    for n in range(12):
        snapshot("orchestrator", {**ORCHESTRATOR, "status": "running"}, session=f"session-{n:02d}")
        snapshot("backend", {"task": f"API {n}", "status": "completed"}, session=f"session-{n:02d}")
        snapshot("qa", {"task": f"Test {n}", "status": "failed", "error": "red"}, session=f"session-{n:02d}")
    monkeypatch.setattr(service, "BATCH_FILES", 6)
    real_write = service.batch_write
    calls = itertools.count()

    def dies_on_the_third_batch(**kwargs):
        if next(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real_write(**kwargs)

    # when the first run dies mid-way
    monkeypatch.setattr(service, "batch_write", dies_on_the_third_batch)
    with pytest.raises(KeyboardInterrupt):
        state_sync()
    assert 0 < SyncedFile.objects.count() < 36
    assert Task.objects.count() == SyncedFile.objects.exclude(path__endswith="orchestrator.json").count()

    # and a second run finishes the job
    monkeypatch.setattr(service, "batch_write", real_write)
    state_sync()
    killed_then_rerun = (tasks_state(), set(AgentSession.objects.values_list("id", "status")))
    events = event_names()

    # then the state is that of one clean run
    Task.objects.all().delete()
    AgentSession.objects.all().delete()
    SyncedFile.objects.all().delete()
    Event.objects.all().delete()
    state_sync()
    assert (tasks_state(), set(AgentSession.objects.values_list("id", "status"))) == killed_then_rerun
    assert event_names() == events  # every task.created once, one sync.completed


def test_one_session_only():
    snapshot("backend", {"task": "A", "status": "running"}, session="session-aaa")
    snapshot("backend", {"task": "B", "status": "running"}, session="session-bbb")

    report = state_sync(session_key="session-bbb")

    assert list(Task.objects.values_list("external_id", flat=True)) == ["task-session-bbb-backend"]
    assert (report.sessions, report.files) == (1, 1)
    assert Event.objects.get(name="sync.completed").subject_id == "session-bbb"


def test_a_missing_state_dir_is_an_empty_run(settings, tmp_path):
    settings.STATE_DIR = tmp_path / "nowhere"

    report = state_sync()

    assert (report.files, report.changed) == (0, False)
    assert not Event.objects.exists()


def test_every_event_a_sync_records_reaches_webhooks_after_commit(monkeypatch, django_capture_on_commit_callbacks):
    # given an active webhook subscription
    from ledger.tasks import webhooks_dispatch_task
    from ledger.webhooks import webhook_subscribe

    webhook_subscribe(url="http://127.0.0.1:9/hook")
    sent = []
    monkeypatch.setattr(webhooks_dispatch_task, "delay", lambda event_id: sent.append(event_id))
    snapshot("backend", {"task": "A", "status": "running"})
    write_file(f"{SESSION}/qa.json", "{")

    # when
    with django_capture_on_commit_callbacks(execute=True):
        state_sync()

    # then one dispatch per event, bulk-inserted or not
    assert sorted(sent) == sorted(Event.objects.values_list("pk", flat=True))
    assert len(sent) == 4  # session.started, task.created, sync.issue, sync.completed
