"""A service queues a task of its own app by name (config.side_effects.registered_task), so it
never imports the app's tasks module, which imports the service."""

import subprocess
import sys
import textwrap

import pytest

from board.tasks import state_sync_task
from config.side_effects import enqueue_task, registered_task


def test_a_name_resolves_to_the_registered_task():
    assert registered_task("board.tasks.state_sync_task") is state_sync_task._get_current_object()


def test_a_task_passes_through():
    assert registered_task(state_sync_task) is state_sync_task


def test_a_process_that_never_imported_the_tasks_module_imports_it_by_the_name():
    # Given a fresh process in which nothing imported board.tasks (a web process, not a worker)
    script = textwrap.dedent(
        """
        import sys, django
        django.setup()
        from config.side_effects import registered_task
        assert "board.tasks" not in sys.modules
        task = registered_task("board.tasks.state_sync_task")
        print(task.name, "board.tasks" in sys.modules)
        """
    )
    # When the name is looked up
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    # Then the module was imported and the task found
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["board.tasks.state_sync_task", "True"]


@pytest.mark.django_db
def test_enqueue_by_name_sends_after_commit(django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr(state_sync_task, "delay", lambda *a, **kw: sent.append((a, kw)))
    with django_capture_on_commit_callbacks(execute=True):
        enqueue_task("board.tasks.state_sync_task", "session-1")
        assert sent == []
    assert sent == [(("session-1",), {})]
