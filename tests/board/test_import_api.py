"""POST /api/v1/priorities/import/ and /api/v1/campaigns/import/: happy paths, refusals, nothing written."""

import json

import pytest
from rest_framework.test import APIClient

from board.models import Campaign, Lead, Task
from tests.board.helpers import assert_json_error, board_state, post_json, post_raw

pytestmark = pytest.mark.django_db

PRIORITIES = "/api/v1/priorities/import/"
CAMPAIGNS = "/api/v1/campaigns/import/"
FILE = "# Plan\n## P1 Backend\n- [ ] Add retries @claude-1\n- [x] Ship it\n"
DEFINITION = {"type": "marketing-campaign", "priority": "high", "deliverables": ["blog-post", "email"]}


@pytest.fixture
def reports(file_roots):
    (file_roots["REPORTS_DIR"] / "plan.md").write_text(FILE)
    return file_roots["REPORTS_DIR"]


@pytest.fixture
def defs(file_roots):
    (file_roots["TASK_DEFS_DIR"] / "launch.json").write_text(json.dumps(DEFINITION))
    return file_roots["TASK_DEFS_DIR"]


def test_dry_run_answers_the_preview_and_writes_nothing(orchestrator_client, reports):
    before = board_state()

    response = post_json(orchestrator_client, PRIORITIES, {"file": "plan.md", "dry_run": True})

    assert response.status_code == 200
    assert response.json() == {
        "file": "plan.md",
        "dry_run": True,
        "counts": {"new": 2, "changed": 0, "unchanged": 0, "gone": 0},
        "new": [
            {
                "title": "Add retries",
                "description": "",
                "priority": "P1",
                "done": False,
                "labels": ["Plan", "Backend"],
                "suggested_agent": "claude-1",
                "line": 3,
                "repository": None,
            },
            {
                "title": "Ship it",
                "description": "",
                "priority": "P1",
                "done": True,
                "labels": ["Plan", "Backend"],
                "suggested_agent": "",
                "line": 4,
                "repository": None,
            },
        ],
        "changed": [],
        "gone": [],
        "warnings": [],
    }
    assert board_state() == before


def test_apply_answers_counts_and_ids_and_a_second_apply_changes_nothing(orchestrator_client, reports):
    response = post_json(orchestrator_client, PRIORITIES, {"file": "plan.md"})

    ids = list(Task.objects.order_by("pk").values_list("pk", flat=True))
    assert response.status_code == 200
    assert response.json() == {
        "file": "plan.md",
        "dry_run": False,
        "counts": {"created": 2, "updated": 0, "blocked": 0, "kept": 0, "unchanged": 0},
        "created": ids,
        "updated": [],
        "blocked": [],
        "kept": [],
        "warnings": [],
    }
    before = board_state()
    again = post_json(orchestrator_client, PRIORITIES, {"file": "plan.md"})
    assert again.json()["counts"] == {"created": 0, "updated": 0, "blocked": 0, "kept": 0, "unchanged": 2}
    assert board_state() == before


def test_a_changed_item_shows_its_changes_in_the_dry_run(staff_client, reports):
    post_json(staff_client, PRIORITIES, {"file": "plan.md"})
    (reports / "plan.md").write_text(FILE.replace("## P1 Backend", "## P0 Backend"))
    task = Task.objects.get(title="Add retries")

    body = post_json(staff_client, PRIORITIES, {"file": "plan.md", "dry_run": True}).json()

    assert body["changed"][0] == {
        "task_id": task.pk,
        "title": "Add retries",
        "status": "ready",
        "changes": {"priority": {"before": "P1", "after": "P0"}},
    }


def test_campaign_import_is_201_then_200_and_never_duplicates(orchestrator_client, defs):
    first = post_json(orchestrator_client, CAMPAIGNS, {"file": "launch.json"})
    second = post_json(orchestrator_client, CAMPAIGNS, {"file": "launch.json"})

    campaign = Campaign.objects.get()
    assert first.status_code == 201
    assert first.json()["created"] is True
    assert first.json()["campaign"]["id"] == campaign.pk
    assert first.json()["campaign"]["tasks_total"] == 2
    assert first.json()["campaign"]["source_file"] == "launch.json"
    assert sorted(first.json()["tasks_created"]) == sorted(Task.objects.values_list("pk", flat=True))
    assert second.status_code == 200
    assert second.json()["created"] is False
    assert second.json()["tasks_created"] == []
    assert (Campaign.objects.count(), Task.objects.count()) == (1, 2)


BAD_NAMES = [
    ("../plan.md", 400, "Refused path: it contains a '..' component."),
    ("%2e%2e/plan.md", 400, "Refused path: it contains a percent-encoded sequence."),
    ("/etc/passwd.md", 400, "Refused path: it is absolute."),
    ("plan\u0000.md", 400, "JSON parse error - strings may not contain NUL"),
    ("sub/plan.md", 400, "Refused path: only files directly in the import folder can be imported"),
    ("plan.txt", 400, "Refused path: the file must be a .md file."),
    ("..\\plan.md", 400, "Refused path: it contains a backslash."),
    ("", 400, "Invalid input: file: This field may not be blank."),
    ("missing.md", 404, "No file 'missing.md' in REPORTS_DIR."),
]


@pytest.mark.parametrize(("name", "status", "message"), BAD_NAMES)
@pytest.mark.parametrize("dry_run", [True, False])
def test_bad_priority_file_names_are_refused_with_a_message_and_nothing_written(
    orchestrator_client, reports, name, status, message, dry_run
):
    before = board_state()

    response = post_json(orchestrator_client, PRIORITIES, {"file": name, "dry_run": dry_run})

    body = assert_json_error(response, status)
    assert body["message"].startswith(message)
    assert board_state() == before


def test_a_symlink_out_of_the_folder_is_refused(orchestrator_client, reports, tmp_path):
    (tmp_path / "secret.md").write_text("- [ ] leaked\n")
    (reports / "link.md").symlink_to(tmp_path / "secret.md")

    response = post_json(orchestrator_client, PRIORITIES, {"file": "link.md"})

    assert assert_json_error(response, 400)["message"] == "Refused path: 'link.md' is a symbolic link or not a folder."
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"- [ ] caf\xe9\n", "'bad.md' is not UTF-8 text (bad byte at offset 9)."),
        (b"- [ ] x\n" * 140_000, "'bad.md' is larger than 1024 KiB; split it into smaller files."),
    ],
)
def test_a_bad_priority_file_is_a_400_and_nothing_is_written(orchestrator_client, reports, content, message):
    (reports / "bad.md").write_bytes(content)
    before = board_state()

    response = post_json(orchestrator_client, PRIORITIES, {"file": "bad.md"})

    assert assert_json_error(response, 400)["message"] == message
    assert board_state() == before


@pytest.mark.parametrize(
    ("content", "status", "message"),
    [
        (b"{nope", 400, "'bad.json' is not valid JSON"),
        (b'{"type": ["a"]}', 400, "'bad.json': type must be a string, not a list."),
        (b'{"type": "t", "leads": [{"name": "A", "score": 1.5}]}', 400, "'bad.json': leads[0].score must be a whole"),
        (b'{"type": "t\xff"}', 400, "'bad.json' is not UTF-8 text"),
        (b" " * (1024 * 1024 + 1), 400, "'bad.json' is larger than 1024 KiB"),
    ],
)
def test_a_bad_campaign_file_is_a_400_naming_the_problem_and_nothing_is_written(
    orchestrator_client, defs, content, status, message
):
    (defs / "bad.json").write_bytes(content)
    before = board_state()

    response = post_json(orchestrator_client, CAMPAIGNS, {"file": "bad.json"})

    assert assert_json_error(response, status)["message"].startswith(message)
    assert board_state() == before


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("../launch.json", 400, "Refused path: it contains a '..' component."),
        ("launch.md", 400, "Refused path: the file must be a .json file."),
        ("missing.json", 404, "No file 'missing.json' in TASK_DEFS_DIR."),
    ],
)
def test_bad_campaign_file_names_are_refused(orchestrator_client, defs, name, status, message):
    response = post_json(orchestrator_client, CAMPAIGNS, {"file": name})

    assert assert_json_error(response, status)["message"] == message
    assert Campaign.objects.count() == 0


@pytest.mark.parametrize(
    "body", ['{"file": 5}', '{"file": "plan.md", "dry_run": "maybe"}', '["plan.md"]', '{"file": "plan.md", "x": 1}']
)
def test_wrong_body_types_are_400(orchestrator_client, reports, body):
    before = board_state()

    response = post_raw(orchestrator_client, PRIORITIES, body)

    assert_json_error(response, 400)
    assert board_state() == before


@pytest.mark.parametrize(("url", "body"), [(PRIORITIES, {"file": "plan.md"}), (CAMPAIGNS, {"file": "launch.json"})])
def test_a_plain_agent_gets_403_and_nothing_is_written(agent_client, reports, defs, url, body):
    before = board_state()

    response = post_json(agent_client, url, body)

    assert assert_json_error(response, 403)["message"].endswith(
        "needs staff or an agent key with the 'orchestrate' scope."
    )
    assert board_state() == before


@pytest.mark.parametrize(("url", "body"), [(PRIORITIES, {"file": "plan.md"}), (CAMPAIGNS, {"file": "launch.json"})])
def test_a_plain_agent_is_refused_before_the_body_is_read(agent_client, url, body):
    response = post_raw(agent_client, url, "{not json")

    assert_json_error(response, 403)


@pytest.mark.parametrize(("url", "body"), [(PRIORITIES, {"file": "plan.md"}), (CAMPAIGNS, {"file": "launch.json"})])
def test_unauthenticated_is_401(reports, defs, url, body):
    response = post_json(APIClient(), url, body)

    assert_json_error(response, 401)
    assert (Task.objects.count(), Campaign.objects.count(), Lead.objects.count()) == (0, 0, 0)


def test_the_file_lists(orchestrator_client, reports, defs, agent_client):
    priorities = orchestrator_client.get("/api/v1/priorities/")
    campaigns = orchestrator_client.get("/api/v1/campaigns/files/")

    assert [f["name"] for f in priorities.json()] == ["plan.md"]
    assert [f["name"] for f in campaigns.json()] == ["launch.json"]
    assert agent_client.get("/api/v1/priorities/").status_code == 403
