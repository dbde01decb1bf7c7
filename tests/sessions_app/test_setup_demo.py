"""setup_demo: what `make run` prepares for a first look, and that running it again is safe."""

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from board.models import Campaign, Task
from config.pages import PRODUCT_OWNERS
from sessions_app.models import AgentApiKey


def _run() -> list[str]:
    out = StringIO()
    call_command("setup_demo", "--port", "9001", stdout=out)
    return out.getvalue().splitlines()


@pytest.mark.django_db
def test_demo_people_tasks_inputs_and_a_key(file_roots):
    lines = _run()

    users = get_user_model().objects
    assert users.get(username="admin").is_superuser
    owner = users.get(username="owner")
    assert not owner.is_staff
    assert list(owner.groups.values_list("name", flat=True)) == [PRODUCT_OWNERS]
    assert owner.check_password("owner")
    assert Task.objects.count() == 4 + 3  # the demo tasks and the campaign's three deliverables
    assert Campaign.objects.count() == 1
    priorities = file_roots["REPORTS_DIR"] / "demo-priorities.md"
    assert "- [ ] Fix the login redirect loop" in priorities.read_text()
    campaign = json.loads((file_roots["TASK_DEFS_DIR"] / "demo-webinar.json").read_text())
    assert campaign["type"] == "marketing-campaign"
    assert "  board      http://127.0.0.1:9001/   (owner / owner, or admin / admin)" in lines
    assert lines[-1].startswith("sy_")
    assert AgentApiKey.objects.count() == 1


@pytest.mark.django_db
def test_running_again_adds_only_a_new_key_and_keeps_edited_inputs(file_roots):
    _run()
    priorities = file_roots["REPORTS_DIR"] / "demo-priorities.md"
    priorities.write_text("- [ ] edited by a person\n")

    lines = _run()

    assert get_user_model().objects.count() == 2
    assert Task.objects.count() == 7
    assert priorities.read_text() == "- [ ] edited by a person\n"
    assert not any(line.startswith("Wrote a sample import file") for line in lines)
    assert AgentApiKey.objects.count() == 2
