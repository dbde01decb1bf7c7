"""Priority files into tasks: preview, apply, idempotence, changes, gone items, held tasks."""

from collections import Counter
from unittest import mock

import pytest
from django.core.management import call_command

from board import services
from board.imports.priorities import GONE_NOTE, priorities_apply, priorities_files, priorities_preview
from board.models import Task
from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from ledger.models import Event
from tests.board.helpers import board_state, task_events

pytestmark = pytest.mark.django_db

FILE = """# Q3
**Priority Level:** Medium

## P0 Security
- [ ] Rotate the keys @claude-1 #ops
  They leaked in a log.
- [x] Turn on 2FA

## Docs
- [ ] Write the guide
- [ ] Old item
"""


@pytest.fixture
def reports(file_roots):
    def write(text: str, name: str = "q3.md"):
        (file_roots["REPORTS_DIR"] / name).write_text(text)
        return name

    return write


def _tasks():
    return list(Task.objects.order_by("pk").values_list("title", "status", "priority", "labels", "suggested_agent"))


def test_files_lists_only_md_files_directly_in_the_folder(reports, file_roots):
    reports("x", "b.md")
    reports("x", "a.md")
    reports("x", "notes.txt")
    reports("x", ".hidden.md")
    (file_roots["REPORTS_DIR"] / "sub").mkdir()
    (file_roots["REPORTS_DIR"] / "link.md").symlink_to(file_roots["REPORTS_DIR"] / "a.md")

    assert [f.name for f in priorities_files()] == ["a.md", "b.md"]


def test_apply_creates_one_task_per_item_with_events_and_a_push(reports):
    name = reports(FILE)

    with mock.patch("board.imports.priorities.board_push_tasks") as push:
        result = priorities_apply(actor=SYSTEM, file_name=name)

    assert _tasks() == [
        ("Rotate the keys", "ready", "P0", ["Q3", "Security", "ops"], "claude-1"),
        ("Turn on 2FA", "done", "P0", ["Q3", "Security"], ""),
        ("Write the guide", "ready", "P2", ["Q3", "Docs"], ""),
        ("Old item", "ready", "P2", ["Q3", "Docs"], ""),
    ]
    ids = list(Task.objects.order_by("pk").values_list("pk", flat=True))
    assert result.created == ids
    assert (result.updated, result.blocked, result.kept, result.unchanged) == ([], [], [], 0)
    assert Task.objects.get(title="Rotate the keys").description == "They leaked in a log."
    assert set(Task.objects.values_list("source_file", flat=True)) == {"q3.md"}
    assert task_events() == Counter({"task.created": 4})
    assert Event.objects.filter(name="priorities.imported").count() == 1
    push.assert_called_once_with(task_ids=ids)


def test_applying_twice_is_idempotent_and_the_second_preview_shows_nothing_to_do(reports):
    name = reports(FILE)
    priorities_apply(actor=SYSTEM, file_name=name)
    before = board_state()

    preview = priorities_preview(file_name=name)
    with mock.patch("board.imports.priorities.board_push_tasks") as push:
        result = priorities_apply(actor=SYSTEM, file_name=name)

    assert (preview.new, preview.changed, preview.gone) == ([], [], [])
    assert len(preview.unchanged) == 4
    assert (result.created, result.updated, result.blocked, result.unchanged) == ([], [], [], 4)
    assert board_state() == before
    push.assert_not_called()


def test_a_changed_title_case_and_priority_show_as_changed_and_apply_updates_the_same_task(reports):
    name = reports(FILE)
    priorities_apply(actor=SYSTEM, file_name=name)
    task = Task.objects.get(title="Write the guide")
    reports(FILE.replace("## Docs", "## P1 Docs").replace("Write the guide", "Write the  Guide"))

    preview = priorities_preview(file_name=name)
    result = priorities_apply(actor=SYSTEM, file_name=name)

    changes = {c.task_id: c.changes for c in preview.changed}
    assert changes[task.pk] == {"title": ("Write the guide", "Write the Guide"), "priority": ("P2", "P1")}
    assert preview.new == []
    assert task.pk in result.updated
    task.refresh_from_db()
    assert (task.title, task.priority, task.status) == ("Write the Guide", "P1", "ready")
    assert Task.objects.count() == 4
    assert Event.objects.filter(name="task.updated", subject_id=str(task.pk)).get().payload["fields"] == [
        "priority",
        "title",
    ]


def test_a_removed_item_is_gone_and_apply_blocks_it_when_unstarted_and_keeps_it_when_started(reports):
    name = reports(FILE)
    priorities_apply(actor=SYSTEM, file_name=name)
    old = Task.objects.get(title="Old item")
    done = Task.objects.get(title="Turn on 2FA")
    reports(FILE.replace("- [ ] Old item\n", "").replace("- [x] Turn on 2FA\n", ""))

    preview = priorities_preview(file_name=name)
    result = priorities_apply(actor=SYSTEM, file_name=name)

    assert {(g.task_id, g.action) for g in preview.gone} == {(old.pk, "block"), (done.pk, "keep")}
    assert (result.blocked, result.kept) == ([old.pk], [done.pk])
    old.refresh_from_db()
    assert old.status == "blocked"
    assert old.error.startswith(f"{GONE_NOTE} 'q3.md'")
    assert Task.objects.get(pk=done.pk).status == "done"
    assert Task.objects.count() == 4  # nothing deleted
    # and a second run has nothing more to block
    again = priorities_apply(actor=SYSTEM, file_name=name)
    assert (again.blocked, again.kept) == ([], [done.pk])


def test_an_item_put_back_unblocks_the_task_it_had_blocked(reports):
    name = reports(FILE)
    priorities_apply(actor=SYSTEM, file_name=name)
    reports(FILE.replace("- [ ] Old item\n", ""))
    priorities_apply(actor=SYSTEM, file_name=name)
    reports(FILE)

    result = priorities_apply(actor=SYSTEM, file_name=name)

    old = Task.objects.get(title="Old item")
    assert result.updated == [old.pk]
    assert (old.status, old.error) == ("ready", "")


def test_a_task_an_agent_holds_keeps_its_agent_and_status_but_follows_the_text(reports, agent):
    name = reports(FILE)
    priorities_apply(actor=SYSTEM, file_name=name)
    task = Task.objects.get(title="Write the guide")
    services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)
    reports(FILE.replace("- [ ] Write the guide", "- [x] Write the GUIDE").replace("- [ ] Old item\n", ""))
    held = Task.objects.get(pk=task.pk)
    held_fields = (held.status, held.assignee_id, held.started_at)

    priorities_apply(actor=SYSTEM, file_name=name)

    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.started_at) == held_fields == ("in_progress", agent.pk, held.started_at)
    assert task.title == "Write the GUIDE"
    assert task.claims.get().outcome == "open"


def test_a_ticked_item_marks_an_unheld_task_done_but_unticking_never_reopens_it(reports):
    name = reports(FILE)
    priorities_apply(actor=SYSTEM, file_name=name)
    reports(FILE.replace("- [ ] Write the guide", "- [x] Write the guide"))
    priorities_apply(actor=SYSTEM, file_name=name)
    task = Task.objects.get(title="Write the guide")
    assert (task.status, task.finished_at is not None) == ("done", True)
    reports(FILE)

    preview = priorities_preview(file_name=name)

    assert task.pk in preview.unchanged
    assert Task.objects.get(pk=task.pk).status == "done"


def test_the_command_previews_and_applies(reports, capsys):
    name = reports(FILE)

    call_command("import_priorities", name, "--dry-run")
    dry = capsys.readouterr().out
    assert Task.objects.count() == 0
    call_command("import_priorities", name)
    out = capsys.readouterr().out

    assert "q3.md: 4 new, 0 changed, 0 unchanged, 0 gone." in dry
    assert "+ [P0] Rotate the keys  labels: Q3, Security, ops" in dry
    assert "Dry run: nothing was written." in dry
    assert "Applied q3.md: 4 created, 0 updated, 0 blocked, 0 kept, 0 unchanged." in out
    assert Task.objects.count() == 4


def test_the_command_lists_the_files_and_asks_for_one(reports, capsys, file_roots):
    from django.core.management.base import CommandError

    call_command("import_priorities", "--list")
    assert capsys.readouterr().out == "No .md files in REPORTS_DIR yet.\n"
    name = reports(FILE)
    size = (file_roots["REPORTS_DIR"] / name).stat().st_size

    call_command("import_priorities", "--list")
    assert capsys.readouterr().out == f"{name}  ({size} bytes)\n"
    with pytest.raises(CommandError, match="Give the name of a file to import"):
        call_command("import_priorities")
    assert Task.objects.count() == 0


def test_the_command_refuses_a_traversal_name_and_writes_nothing(reports):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"Refused path: it contains a '\.\.' component"):
        call_command("import_priorities", "../q3.md")
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("q3\x00.md", "Refused path: it contains a NUL byte."),
        ("/tmp/q3.md", "Refused path: it is absolute."),
        ("%2e%2e/q3.md", "Refused path: it contains a percent-encoded sequence."),
        (5, "Refused path: the path must be a string."),
    ],
)
def test_the_service_refuses_unsafe_names_itself(reports, name, message):
    reports(FILE)

    with pytest.raises(DomainError) as caught:
        priorities_preview(file_name=name)

    assert caught.value.message == message
