"""Task → repository (SPEC §8): set through the task and campaign APIs by name, from a priority
file's ``repo:<name>`` label and from a campaign definition's ``repository``; shown in the task output."""

import json

import pytest
from django.core.management import call_command

from board.imports.campaigns import campaign_import
from board.imports.priorities import priorities_apply, priorities_preview
from board.imports.priority_parse import priority_file_parse
from board.models import Task
from config.actors import SYSTEM
from config.api.errors import DomainError
from tests.board.helpers import board_state
from workspaces.models import Repository

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path):
    Repository.objects.create(name="api", path=str(tmp_path / "api"))
    return Repository.objects.create(name="shop", path=str(tmp_path / "shop"))


@pytest.fixture
def reports(file_roots):
    def write(text: str, name: str = "q3.md") -> str:
        (file_roots["REPORTS_DIR"] / name).write_text(text)
        return name

    return write


@pytest.fixture
def defs(file_roots):
    def write(body: dict, name: str = "launch.json") -> str:
        (file_roots["TASK_DEFS_DIR"] / name).write_text(json.dumps(body))
        return name

    return write


# --- the task API ---------------------------------------------------------------------------


def test_a_task_is_created_with_a_repository_by_name_and_shows_it(orchestrator_client, shop):
    response = orchestrator_client.post("/api/v1/tasks/", {"title": "Fix cart", "repository": "shop"}, format="json")

    assert response.status_code == 201
    assert response.json()["repository"] == "shop"
    task = Task.objects.get()
    assert task.repository_id == shop.pk
    assert orchestrator_client.get(f"/api/v1/tasks/{task.pk}/").json()["repository"] == "shop"
    listed = orchestrator_client.get("/api/v1/tasks/").json()["results"]
    assert [row["repository"] for row in listed] == ["shop"]


def test_a_task_without_a_repository_shows_null(orchestrator_client):
    response = orchestrator_client.post("/api/v1/tasks/", {"title": "Anywhere"}, format="json")

    assert response.status_code == 201
    assert response.json()["repository"] is None


def test_an_unknown_repository_is_400_naming_the_known_ones_and_nothing_is_written(orchestrator_client, shop):
    response = orchestrator_client.post("/api/v1/tasks/", {"title": "Fix cart", "repository": "shp"}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert "shp" in body["message"]
    assert body["known"] == ["api", "shop"]
    assert Task.objects.count() == 0


def test_claiming_shows_the_repository_too(agent_client, shop):
    task = Task.objects.create(title="t", status=Task.Status.READY, rank=1024, repository=shop)

    claimed = agent_client.post("/api/v1/tasks/claim-next/", {}, format="json")
    by_id = agent_client.post(f"/api/v1/tasks/{task.pk}/claim/", {}, format="json")

    assert claimed.json()["repository"] == "shop"
    assert by_id.json()["repository"] == "shop"


def test_a_campaign_created_through_the_api_gives_its_tasks_the_repository(orchestrator_client, shop):
    body = {"type": "launch", "deliverables": ["blog", "email"], "repository": "shop"}

    response = orchestrator_client.post("/api/v1/campaigns/", body, format="json")
    unknown = orchestrator_client.post("/api/v1/campaigns/", {**body, "repository": "nope"}, format="json")

    assert response.status_code == 201
    assert set(Task.objects.values_list("repository__name", flat=True)) == {"shop"}
    assert unknown.status_code == 400
    assert unknown.json()["known"] == ["api", "shop"]
    assert Task.objects.count() == 2


# --- priority files -------------------------------------------------------------------------


def test_the_parser_reads_a_repo_label_and_keeps_it_as_a_label():
    (item,) = priority_file_parse("- [ ] Fix the cart #repo:shop #bug\n", file_name="q3.md")

    assert item.repository == "shop"
    assert item.labels == ("repo:shop", "bug")
    assert item.title == "Fix the cart"


def test_a_plain_tag_followed_by_a_colon_is_still_the_plain_tag():
    (item,) = priority_file_parse("- [ ] #bug: the cart is empty\n", file_name="q3.md")

    assert (item.labels, item.repository) == (("bug",), "")


def test_a_repo_label_sets_the_repository(reports, shop):
    name = reports("## Backend\n- [ ] Fix the cart #repo:shop\n- [ ] Anywhere\n")

    result = priorities_apply(actor=SYSTEM, file_name=name)

    assert result.warnings == []
    rows = list(Task.objects.order_by("pk").values_list("title", "repository__name", "labels"))
    assert rows == [("Fix the cart", "shop", ["Backend", "repo:shop"]), ("Anywhere", None, ["Backend"])]


def test_an_unknown_repo_label_imports_the_task_without_one_and_warns(reports, shop):
    name = reports("- [ ] Fix the cart #repo:shp\n")

    preview = priorities_preview(file_name=name)
    result = priorities_apply(actor=SYSTEM, file_name=name)

    assert len(preview.warnings) == 1
    assert result.warnings == preview.warnings
    assert "'shp'" in result.warnings[0] and "Line 1" in result.warnings[0]
    task = Task.objects.get()
    assert (task.repository_id, task.labels) == (None, ["repo:shp"])


def test_a_repo_label_added_later_updates_the_task_and_a_second_import_changes_nothing(reports, shop):
    name = reports("- [ ] Fix the cart\n")
    priorities_apply(actor=SYSTEM, file_name=name)
    reports("- [ ] Fix the cart #repo:shop\n")

    preview = priorities_preview(file_name=name)
    result = priorities_apply(actor=SYSTEM, file_name=name)
    again = priorities_apply(actor=SYSTEM, file_name=name)

    assert preview.changed[0].changes["repository"] == (None, "shop")
    assert len(result.updated) == 1
    assert Task.objects.get().repository_id == shop.pk
    assert not again.changed_anything


def test_a_file_without_the_label_leaves_a_repository_set_on_the_card(reports, shop):
    name = reports("- [ ] Fix the cart\n")
    priorities_apply(actor=SYSTEM, file_name=name)
    Task.objects.update(repository=shop)

    assert not priorities_apply(actor=SYSTEM, file_name=name).changed_anything
    assert Task.objects.get().repository_id == shop.pk


def test_the_api_answers_the_warnings(orchestrator_client, reports, shop):
    reports("- [ ] Fix the cart #repo:shp\n- [ ] Fix the till #repo:shop\n")

    preview = orchestrator_client.post(
        "/api/v1/priorities/import/", {"file": "q3.md", "dry_run": True}, format="json"
    ).json()
    applied = orchestrator_client.post("/api/v1/priorities/import/", {"file": "q3.md"}, format="json").json()

    assert [item["repository"] for item in preview["new"]] == ["shp", "shop"]
    assert len(preview["warnings"]) == 1
    assert applied["warnings"] == preview["warnings"]
    assert applied["counts"]["created"] == 2


def test_the_command_prints_the_warnings(reports, shop, capsys):
    reports("- [ ] Fix the cart #repo:shp\n")

    call_command("import_priorities", "q3.md")

    assert "Warning: Line 1: no repository is registered as 'shp'" in capsys.readouterr().out


# --- campaign definitions -------------------------------------------------------------------


def test_a_campaign_definition_names_the_repository_of_its_tasks(defs, shop):
    name = defs({"type": "launch", "deliverables": ["blog", "email"], "repository": "shop"})

    result = campaign_import(actor=SYSTEM, file_name=name)

    assert len(result.tasks_created) == 2
    assert set(Task.objects.values_list("repository_id", flat=True)) == {shop.pk}


def test_a_repository_added_to_a_definition_later_updates_its_tasks(defs, shop):
    name = defs({"type": "launch", "deliverables": ["blog"]})
    campaign_import(actor=SYSTEM, file_name=name)
    defs({"type": "launch", "deliverables": ["blog"], "repository": "shop"})

    result = campaign_import(actor=SYSTEM, file_name=name)
    again = campaign_import(actor=SYSTEM, file_name=name)

    assert len(result.tasks_updated) == 1
    assert Task.objects.get().repository_id == shop.pk
    assert again.tasks_updated == []


def test_an_unknown_repository_refuses_the_campaign_and_writes_nothing(defs, shop):
    name = defs({"type": "launch", "deliverables": ["blog"], "repository": "shp"})
    before = board_state()

    with pytest.raises(DomainError) as refused:
        campaign_import(actor=SYSTEM, file_name=name)

    assert refused.value.status_code == 400
    assert "repository 'shp'" in refused.value.message
    assert refused.value.extra["errors"]["repository"]
    assert board_state() == before


def test_a_repository_that_is_not_a_string_is_a_field_error(defs):
    name = defs({"type": "launch", "repository": 7})

    with pytest.raises(DomainError) as refused:
        campaign_import(actor=SYSTEM, file_name=name)

    assert "repository" in refused.value.extra["errors"]


def test_the_campaign_import_api_refuses_an_unknown_repository(orchestrator_client, defs, shop):
    defs({"type": "launch", "deliverables": ["blog"], "repository": "shp"})

    response = orchestrator_client.post("/api/v1/campaigns/import/", {"file": "launch.json"}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["repository"]
    assert Task.objects.count() == 0
