"""Campaign definitions into a campaign, one task per deliverable, and leads; idempotent."""

import json
from collections import Counter

import pytest
from django.core.management import call_command

from board.imports.campaigns import campaign_files, campaign_import, deliverable_key
from board.imports.selectors import campaign_progress_list
from board.models import Campaign, Lead, Task
from config.actors import SYSTEM
from config.api.errors import DomainError
from ledger.models import Event
from tests.board.helpers import board_state

pytestmark = pytest.mark.django_db

DEFINITION = {
    "type": "marketing-campaign",
    "name": "Spring launch",
    "priority": "high",
    "deliverables": ["blog-post", "social-media", "email"],
    "target_audience": "Platform teams",
    "goal": "Fifty teams try it",
    "starts_on": "2026-03-01",
    "ends_on": "2026-03-31",
    "leads": [
        {"name": "Ada Lovelace", "company": "Analytical", "email": "ada@example.com", "status": "new", "score": 80},
        {"name": "Grace Hopper", "company": "Navy", "score": 65},
    ],
    "budget": 1000,
}


@pytest.fixture
def defs(file_roots):
    def write(body, name: str = "spring.json"):
        text = body if isinstance(body, str) else json.dumps(body)
        (file_roots["TASK_DEFS_DIR"] / name).write_text(text)
        return name

    return write


def test_import_creates_the_campaign_its_deliverable_tasks_and_leads(defs):
    name = defs(DEFINITION)

    result = campaign_import(actor=SYSTEM, file_name=name)

    campaign = Campaign.objects.get()
    assert result.created is True
    assert (campaign.name, campaign.type, campaign.priority, campaign.source_file) == (
        "Spring launch",
        "marketing-campaign",
        "P1",
        "spring.json",
    )
    assert (str(campaign.starts_on), str(campaign.ends_on), campaign.goal) == (
        "2026-03-01",
        "2026-03-31",
        "Fifty teams try it",
    )
    assert list(Task.objects.order_by("rank").values_list("title", "status", "priority", "labels", "source_key")) == [
        (
            f"Spring launch: {d}",
            "ready",
            "P1",
            ["marketing-campaign", d],
            deliverable_key(file_name="spring.json", deliverable=d),
        )
        for d in ["blog-post", "social-media", "email"]
    ]
    assert result.tasks_created == list(Task.objects.order_by("pk").values_list("pk", flat=True))
    assert list(Lead.objects.order_by("name").values_list("name", "company", "email", "status", "score")) == [
        ("Ada Lovelace", "Analytical", "ada@example.com", "new", 80),
        ("Grace Hopper", "Navy", "", "new", 65),
    ]
    assert Counter(Event.objects.values_list("name", flat=True)) == Counter({"campaign.created": 1, "task.created": 3})


def test_importing_again_changes_nothing(defs):
    name = defs(DEFINITION)
    campaign_import(actor=SYSTEM, file_name=name)
    before = board_state()

    result = campaign_import(actor=SYSTEM, file_name=name)

    assert (result.created, result.campaign_fields, result.tasks_created, result.tasks_updated) == (False, [], [], [])
    assert result.leads_created == 0
    assert board_state() == before


def test_importing_an_edited_file_updates_and_adds_only_what_is_missing(defs):
    name = defs(DEFINITION)
    campaign_import(actor=SYSTEM, file_name=name)
    Lead.objects.filter(name="Ada Lovelace").update(status="contacted")
    edited = {
        **DEFINITION,
        "priority": "P0",
        "deliverables": ["blog-post", "webinar"],
        "leads": [*DEFINITION["leads"], {"name": "Alan Turing", "company": "Bletchley"}],
    }
    defs(edited)

    result = campaign_import(actor=SYSTEM, file_name=name)

    assert result.created is False
    assert result.campaign_fields == ["priority", "deliverables"]
    assert Campaign.objects.get().priority == "P0"
    assert sorted(Task.objects.values_list("title", "priority")) == [
        ("Spring launch: blog-post", "P0"),
        ("Spring launch: email", "P1"),  # dropped from the file: kept, untouched
        ("Spring launch: social-media", "P1"),
        ("Spring launch: webinar", "P0"),
    ]
    assert len(result.tasks_created) == 1
    assert len(result.tasks_updated) == 1
    assert result.leads_created == 1
    assert Lead.objects.get(name="Ada Lovelace").status == "contacted"  # people's progress is kept
    assert Lead.objects.count() == 3


def test_only_type_is_required(defs):
    name = defs({"type": "outreach"})

    result = campaign_import(actor=SYSTEM, file_name=name)

    assert (result.campaign.name, result.campaign.priority, result.campaign.deliverables) == ("outreach", "P2", [])
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "'spring.json' is not valid JSON: Expecting property name enclosed in double quotes at line 1"),
        ("[1, 2]", "'spring.json' must hold a JSON object, not a list."),
        ({"name": "x"}, "'spring.json': type is required."),
        ({"type": 5}, "'spring.json': type must be a string, not a number."),
        ({"type": "t", "priority": "urgent-ish"}, "'spring.json': priority Unknown priority 'urgent-ish'"),
        ({"type": "t", "deliverables": "blog"}, "'spring.json': deliverables must be a list of strings, not a string."),
        (
            {"type": "t", "deliverables": ["a", 3]},
            "'spring.json': deliverables[1] must be a non-empty string, not a number.",
        ),
        ({"type": "t", "starts_on": "March"}, "'spring.json': starts_on 'March' is not a date (YYYY-MM-DD)."),
        (
            {"type": "t", "starts_on": "2026-03-02", "ends_on": "2026-03-01"},
            "'spring.json': ends_on is before starts_on.",
        ),
        (
            {"type": "t", "leads": [{"name": "A", "score": "high"}]},
            "'spring.json': leads[0].score must be a whole number",
        ),
        (
            {"type": "t", "leads": [{"name": "A", "email": "nope"}]},
            "'spring.json': leads[0].email 'nope' is not an email",
        ),
        ({"type": "t", "leads": [{"company": "A"}]}, "'spring.json': leads[0].name is required."),
        ({"type": "t", "leads": [{"name": "A", "status": "hot"}]}, "'spring.json': leads[0].status must be one of"),
    ],
)
def test_a_bad_definition_is_refused_naming_the_problem_and_nothing_is_written(defs, body, message):
    name = defs(body)

    with pytest.raises(DomainError) as caught:
        campaign_import(actor=SYSTEM, file_name=name)

    assert caught.value.code == "invalid"
    assert caught.value.message.startswith(message)
    assert (Campaign.objects.count(), Task.objects.count(), Lead.objects.count()) == (0, 0, 0)


def test_campaign_files_lists_json_files(defs):
    defs({"type": "a"}, "b.json")
    defs({"type": "a"}, "a.json")
    defs("x", "a.md")

    assert [f.name for f in campaign_files()] == ["a.json", "b.json"]


def test_progress_counts_done_deliverables_per_campaign_in_two_queries(defs, django_assert_num_queries):
    campaign_import(actor=SYSTEM, file_name=defs(DEFINITION))
    campaign_import(actor=SYSTEM, file_name=defs({"type": "other", "deliverables": ["x"]}, "other.json"))
    Task.objects.filter(title="Spring launch: email").update(status="done")

    with django_assert_num_queries(2):
        rows = [(c.name, c.tasks_done, c.tasks_total, len(c.leads.all())) for c in campaign_progress_list()]

    assert sorted(rows) == [("Spring launch", 1, 3, 2), ("other", 0, 1, 0)]


def test_the_command_imports_and_says_what_it_did(defs, capsys):
    name = defs(DEFINITION)

    call_command("import_campaign", name)
    first = capsys.readouterr().out
    call_command("import_campaign", name)
    second = capsys.readouterr().out

    campaign = Campaign.objects.get()
    assert f"Created campaign #{campaign.pk} 'Spring launch' (P1)" in first
    assert "deliverable tasks: 3 created, 0 updated; leads: 2 added" in first
    assert f"Unchanged: campaign #{campaign.pk} 'Spring launch' (P1)" in second
