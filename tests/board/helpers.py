"""Shared assertions for the board tests: what the board's tables hold, and raw JSON posts."""

import json
from collections import Counter

from board.models import Campaign, Lead, Task, TaskClaim
from ledger.models import Event


def board_state() -> dict[str, list]:
    """Every row a board write could touch, in a comparable form.

    A denied action is proven harmless by taking this before and comparing after: any
    insert, update or delete of a task, claim, campaign, lead or ledger event shows up.
    """
    return {
        "tasks": list(Task.objects.order_by("pk").values()),
        "claims": list(TaskClaim.objects.order_by("pk").values()),
        "campaigns": list(Campaign.objects.order_by("pk").values()),
        "leads": list(Lead.objects.order_by("pk").values()),
        "events": list(Event.objects.order_by("pk").values("pk", "name", "subject_type", "subject_id", "payload")),
    }


def task_events() -> Counter:
    """How many ledger events of each name were recorded about tasks."""
    return Counter(Event.objects.filter(subject_type="task").values_list("name", flat=True))


def post_json(client, url: str, body) -> object:
    return client.post(url, data=json.dumps(body), content_type="application/json")


def post_raw(client, url: str, text: str | bytes, content_type: str = "application/json") -> object:
    """Send ``text`` exactly as given, so the server's JSON parser sees escapes like \\u0000."""
    return client.generic("POST", url, data=text, content_type=content_type)


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert isinstance(body["message"], str)
    assert body["message"]
    return body
