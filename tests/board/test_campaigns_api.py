"""The campaign endpoints: create from a SPEC §5 definition, list, read."""

from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board.models import Campaign, Lead, Task
from ledger.models import Event
from tests.board.helpers import assert_json_error, board_state, post_json, task_events
from tests.factories import CampaignFactory, TaskFactory

pytestmark = pytest.mark.django_db

CAMPAIGNS = "/api/v1/campaigns/"

SPEC_EXAMPLE = {
    "type": "marketing-campaign",
    "priority": "high",
    "deliverables": ["blog-post", "social-media", "email"],
    "target_audience": "Platform teams running coding agents",
}


def test_the_spec_example_creates_a_campaign_with_one_ready_task_per_deliverable(orchestrator_client):
    # when the orchestrator posts the SPEC's example definition
    response = post_json(orchestrator_client, CAMPAIGNS, SPEC_EXAMPLE)

    # then the campaign is stored, named after its type, at P1
    assert response.status_code == 201
    body = response.json()
    campaign = Campaign.objects.get()
    assert body == {
        "id": campaign.pk,
        "name": "marketing-campaign",
        "type": "marketing-campaign",
        "priority": "P1",
        "deliverables": ["blog-post", "social-media", "email"],
        "target_audience": "Platform teams running coding agents",
        "goal": "",
        "starts_on": None,
        "ends_on": None,
        "status": "active",
        "source_file": "",
        "tasks_total": 3,
        "tasks_done": 0,
        "leads_total": 0,
        "created_at": body["created_at"],
    }
    # and each deliverable is a ready P1 task in it, in the order given
    tasks = list(Task.objects.order_by("rank").values_list("title", "status", "priority", "labels", "campaign_id"))
    assert tasks == [
        ("marketing-campaign: blog-post", "ready", "P1", ["marketing-campaign", "blog-post"], campaign.pk),
        ("marketing-campaign: social-media", "ready", "P1", ["marketing-campaign", "social-media"], campaign.pk),
        ("marketing-campaign: email", "ready", "P1", ["marketing-campaign", "email"], campaign.pk),
    ]
    # and the ledger records the campaign and its three tasks
    assert Counter(Event.objects.values_list("name", flat=True)) == Counter({"campaign.created": 1, "task.created": 3})
    assert Event.objects.get(name="campaign.created").payload == {"name": "marketing-campaign", "deliverables": 3}


def test_every_optional_field_is_stored(staff_client):
    response = post_json(
        staff_client,
        CAMPAIGNS,
        {
            **SPEC_EXAMPLE,
            "name": "Spring launch",
            "goal": "Get 50 teams to try it",
            "starts_on": "2026-03-01",
            "ends_on": "2026-03-31",
        },
    )

    assert response.status_code == 201
    campaign = Campaign.objects.get()
    assert (campaign.name, campaign.goal, str(campaign.starts_on), str(campaign.ends_on)) == (
        "Spring launch",
        "Get 50 teams to try it",
        "2026-03-01",
        "2026-03-31",
    )
    assert set(Task.objects.values_list("title", "description")) == {
        ("Spring launch: blog-post", "Get 50 teams to try it"),
        ("Spring launch: social-media", "Get 50 teams to try it"),
        ("Spring launch: email", "Get 50 teams to try it"),
    }


def test_a_campaign_with_only_a_type_gets_no_tasks(orchestrator_client):
    response = post_json(orchestrator_client, CAMPAIGNS, {"type": "outreach"})

    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["priority"], body["deliverables"], body["tasks_total"]) == ("outreach", "P2", [], 0)
    assert Task.objects.count() == 0
    assert task_events() == Counter()


@pytest.mark.parametrize(
    ("word", "code"),
    [
        ("critical", "P0"),
        ("urgent", "P0"),
        ("high", "P1"),
        ("High", "P1"),
        (" HIGH ", "P1"),
        ("medium", "P2"),
        ("normal", "P2"),
        ("low", "P3"),
        ("P0", "P0"),
        ("p3", "P3"),
    ],
)
def test_priority_words_map_to_codes_for_the_campaign_and_its_tasks(orchestrator_client, word, code):
    response = post_json(orchestrator_client, CAMPAIGNS, {"type": "t", "priority": word, "deliverables": ["d"]})

    assert response.status_code == 201
    assert response.json()["priority"] == code
    assert Task.objects.get().priority == code


@pytest.mark.parametrize("priority", ["highest", "P4", "P", "0", "🔥"])
def test_an_unknown_priority_is_400_and_nothing_is_written(orchestrator_client, priority):
    before = board_state()

    response = post_json(orchestrator_client, CAMPAIGNS, {**SPEC_EXAMPLE, "priority": priority})

    body = assert_json_error(response, 400)
    assert body["message"] == f"Unknown priority {priority!r}; use P0-P3 or critical, high, medium, low."
    assert board_state() == before


def test_ends_on_before_starts_on_is_400_and_nothing_is_written(orchestrator_client):
    before = board_state()

    response = post_json(
        orchestrator_client, CAMPAIGNS, {**SPEC_EXAMPLE, "starts_on": "2026-03-31", "ends_on": "2026-03-01"}
    )

    assert assert_json_error(response, 400)["message"] == "ends_on is before starts_on."
    assert board_state() == before


def test_a_one_day_campaign_is_fine(orchestrator_client):
    response = post_json(
        orchestrator_client, CAMPAIGNS, {"type": "t", "starts_on": "2026-03-01", "ends_on": "2026-03-01"}
    )

    assert response.status_code == 201


def test_leads_are_created_with_their_defaults(orchestrator_client):
    # when a definition carries leads, one with every field and one with a name only
    response = post_json(
        orchestrator_client,
        CAMPAIGNS,
        {
            **SPEC_EXAMPLE,
            "leads": [
                {
                    "name": "Ada",
                    "company": "Analytical",
                    "email": "ada@example.com",
                    "status": "qualified",
                    "score": 90,
                },
                {"name": "Grace"},
            ],
        },
    )

    # then both are rows of the campaign
    assert response.status_code == 201
    assert response.json()["leads_total"] == 2
    campaign = Campaign.objects.get()
    assert list(Lead.objects.values_list("campaign_id", "name", "company", "email", "status", "score")) == [
        (campaign.pk, "Ada", "Analytical", "ada@example.com", "qualified", 90),
        (campaign.pk, "Grace", "", "", "new", 0),
    ]


@pytest.mark.parametrize(
    ("leads", "message"),
    [
        ([{"company": "No name"}], "Invalid input: leads: 1: name: This field is required."),
        ([{"name": "Ada", "email": "not-an-email"}], "Invalid input: leads: 1: email: Enter a valid email address."),
        ([{"name": "Ada", "status": "married"}], 'Invalid input: leads: 1: status: "married" is not a valid choice.'),
        (
            [{"name": "Ada", "score": 1_000_001}],
            "Invalid input: leads: 1: score: Ensure this value is less than or equal to 1000000.",
        ),
        (
            [{"name": "Ada", "phone": "555"}],
            'Invalid input: leads: 1: phone: Unknown field "phone"; expected: name, company, email, status, score.',
        ),
        ([{"name": 7}], "Invalid input: leads: 1: name: Must be a string."),
        (["Ada"], "Invalid input: leads: 1: Invalid data. Expected a dictionary, but got str."),
        ({"name": "Ada"}, 'Invalid input: leads: Expected a list of items but got type "dict".'),
    ],
)
def test_a_bad_lead_is_400_and_nothing_is_written(orchestrator_client, leads, message):
    before = board_state()

    response = post_json(
        orchestrator_client,
        CAMPAIGNS,
        {**SPEC_EXAMPLE, "leads": [{"name": "Fine"}, *leads] if isinstance(leads, list) else leads},
    )

    body = assert_json_error(response, 400)
    assert list(body["errors"]) == ["leads"]
    assert body["message"] == message
    assert board_state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "type"),
        ({"type": ""}, "type"),
        ({"type": 5}, "type"),
        ({"type": ["a"]}, "type"),
        ({"type": "t" * 101}, "type"),
        ({"type": "t", "name": 5}, "name"),
        ({"type": "t", "priority": 1}, "priority"),
        ({"type": "t", "priority": ""}, "priority"),
        ({"type": "t", "deliverables": "blog-post"}, "deliverables"),
        ({"type": "t", "deliverables": [1]}, "deliverables"),
        ({"type": "t", "deliverables": [""]}, "deliverables"),
        ({"type": "t", "deliverables": ["d"] * 501}, "deliverables"),
        ({"type": "t", "starts_on": "2026-02-30"}, "starts_on"),
        ({"type": "t", "ends_on": "tomorrow"}, "ends_on"),
        ({"type": "t", "ends_on": 20260301}, "ends_on"),
        ({"type": "t", "status": "draft"}, "status"),
        ({"type": "t", "source_file": "/etc/passwd"}, "source_file"),
    ],
)
def test_a_bad_definition_is_400_naming_the_field_and_nothing_is_written(orchestrator_client, body, field):
    before = board_state()

    response = post_json(orchestrator_client, CAMPAIGNS, body)

    assert list(assert_json_error(response, 400)["errors"]) == [field]
    assert board_state() == before


def test_a_plain_agent_may_not_create_campaigns_and_nothing_is_written(agent_client):
    before = board_state()

    response = post_json(agent_client, CAMPAIGNS, {**SPEC_EXAMPLE, "leads": [{"name": "Ada"}]})

    body = assert_json_error(response, 403)
    assert body["message"] == "Creating campaigns needs staff or an agent key with the 'orchestrate' scope."
    assert board_state() == before


def test_creating_without_credentials_is_401_and_nothing_is_written(client, db):
    before = board_state()

    response = post_json(client, CAMPAIGNS, SPEC_EXAMPLE)

    assert_json_error(response, 401)
    assert board_state() == before


# --- list and read ------------------------------------------------------------------------


def test_the_list_counts_tasks_and_done_tasks_newest_first(orchestrator_client, agent_client):
    # given an older campaign with one lead and a newer one with three deliverables
    older = post_json(orchestrator_client, CAMPAIGNS, {"type": "outreach", "leads": [{"name": "Ada"}]}).json()["id"]
    newer = post_json(orchestrator_client, CAMPAIGNS, SPEC_EXAMPLE).json()["id"]

    # when an agent finishes one deliverable and fails another
    first = agent_client.post("/api/v1/tasks/claim-next/").json()["id"]
    agent_client.post(f"/api/v1/tasks/{first}/complete/")
    second = agent_client.post("/api/v1/tasks/claim-next/").json()["id"]
    post_json(agent_client, f"/api/v1/tasks/{second}/fail/", {"error": "no"})

    # then the list shows the counts, newest campaign first
    response = agent_client.get(CAMPAIGNS)
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (2, None, None)
    assert [(row["id"], row["tasks_total"], row["tasks_done"], row["leads_total"]) for row in body["results"]] == [
        (newer, 3, 1, 0),
        (older, 0, 0, 1),
    ]


def test_counts_are_not_multiplied_by_leads(orchestrator_client, agent_client):
    # Two to-many joins in one query multiply rows; the counts must not.
    campaign_id = post_json(
        orchestrator_client, CAMPAIGNS, {**SPEC_EXAMPLE, "leads": [{"name": n} for n in ("A", "B", "C", "D")]}
    ).json()["id"]
    done = agent_client.post("/api/v1/tasks/claim-next/").json()["id"]
    agent_client.post(f"/api/v1/tasks/{done}/complete/")

    body = agent_client.get(f"{CAMPAIGNS}{campaign_id}/").json()

    assert (body["tasks_total"], body["tasks_done"], body["leads_total"]) == (3, 1, 4)


def test_reading_a_campaign(agent_client):
    campaign = CampaignFactory(name="Autumn", priority="P0")
    TaskFactory(campaign=campaign, status="done")
    TaskFactory(campaign=campaign, status="ready")

    response = agent_client.get(f"{CAMPAIGNS}{campaign.pk}/")

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["name"], body["priority"], body["tasks_total"], body["tasks_done"]) == (
        campaign.pk,
        "Autumn",
        "P0",
        2,
        1,
    )


def test_reading_an_unknown_campaign_is_404(agent_client):
    response = agent_client.get(f"{CAMPAIGNS}424242/")

    assert assert_json_error(response, 404)["message"] == "Campaign 424242 not found."


def test_listing_without_credentials_is_401(client, db):
    assert_json_error(client.get(CAMPAIGNS), 401)


def test_the_campaign_list_costs_the_same_queries_for_2_and_40_rows(agent_client, django_assert_num_queries):
    # given campaigns that each have tasks and leads to count
    def add(count: int) -> None:
        for i in range(count):
            campaign = CampaignFactory()
            TaskFactory(campaign=campaign, status="done")
            TaskFactory(campaign=campaign, status="ready")
            Lead.objects.create(campaign=campaign, name=f"Lead {i}")

    add(2)
    # The first request of a key writes its last-used time; later ones within a minute don't.
    agent_client.get(CAMPAIGNS)
    with CaptureQueriesContext(connection) as two_rows:
        assert agent_client.get(CAMPAIGNS).status_code == 200

    # when there are 40 campaigns
    add(38)

    # then the list costs exactly as many queries: key lookup, count, page with its counts
    assert len(two_rows) == 3
    with django_assert_num_queries(len(two_rows)):
        response = agent_client.get(CAMPAIGNS)
    body = response.json()
    assert body["count"] == 40
    assert {(row["tasks_total"], row["tasks_done"], row["leads_total"]) for row in body["results"]} == {(2, 1, 1)}
