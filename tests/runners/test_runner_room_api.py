"""Runners that fit their machine (issue 26 §3), server side: the ``room`` a runner sends with its ask
for work bounds what it is handed (runners/room.py), its heartbeat's memory and load are kept and
shown, and a run queued for lack of memory says so on its card."""

import pytest
from django.utils import timezone

from config.pages import ENGINEERS
from runners.models import Run, Runner
from tests.page_users import user_in
from tests.runners.runner_clients import world_state

pytestmark = pytest.mark.django_db
NEXT = "/api/v1/runners/me/next/"
BEAT = "/api/v1/runners/me/heartbeat/"
MEMORY = {"available_mb": 1500, "total_mb": 4000, "min_free_mb": 1024, "reserved_mb": 0, "needs_mb": {"claude": 512}}


def ask(client, room, wait=0):
    response = client.post(NEXT, {"wait": wait, "room": room}, format="json")
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["runs"]]


def statuses(*runs):
    return [Run.objects.get(pk=run.pk).status for run in runs]


def test_no_more_runs_are_handed_out_than_the_machine_has_room_for(runner_client, queue_run):
    # given two queued claude runs and a runner of capacity 2 whose memory takes one more claude run
    first, second = queue_run(provider="claude"), queue_run(provider="claude")

    # when it asks for work saying so
    handed = ask(runner_client, {"claude": 1, "demo": 12})

    # then it gets the first; the second stays queued here (never handed out to be refused there)
    assert handed == [first.pk]
    assert statuses(first, second) == ["assigned", "queued"]
    # and what it said is kept for the card and the Runners page
    assert Runner.objects.get(pk=runner_client.runner.pk).room == {"claude": 1, "demo": 12}


def test_a_provider_without_room_or_left_out_gets_nothing_while_others_do(runner_client, queue_run):
    claude, demo = queue_run(provider="claude"), queue_run(provider="demo")

    assert ask(runner_client, {"claude": 0, "demo": 3}) == [demo.pk]
    assert statuses(claude) == ["queued"]
    # a provider the room leaves out has none
    assert ask(runner_client, {"demo": 3}) == []
    assert statuses(claude) == ["queued"]


def test_runs_of_several_providers_share_the_room(runner_client, queue_run):
    # room for 4 demo runs or 1 claude run: a demo takes a quarter, so the claude one no longer fits
    demo, claude = queue_run(provider="demo"), queue_run(provider="claude")

    assert ask(runner_client, {"claude": 1, "demo": 4}) == [demo.pk]
    assert statuses(claude) == ["queued"]
    # the next ask, with what is left, takes it
    assert ask(runner_client, {"claude": 1, "demo": 3}) == [claude.pk]


def test_null_room_is_capacity_alone(runner_client, queue_run):
    # (a runner that cannot read its memory; one that sends no room at all is test_runner_next_api.py's)
    first, second, third = (queue_run(provider="claude") for _ in range(3))

    assert ask(runner_client, {"claude": 0}) == []
    assert ask(runner_client, None) == [first.pk, second.pk]
    assert statuses(third) == ["queued"]  # capacity 2 is full
    assert Runner.objects.get(pk=runner_client.runner.pk).room is None


@pytest.mark.parametrize(
    "room",
    [
        {"claude": -1},
        {"claude": True},
        {"claude": 1.5},
        {"claude": "1"},
        {"claude code": 1},
        ["claude"],
        "claude",
        {"claude": 10_001},
    ],
)
def test_a_bad_room_is_400_naming_it_and_hands_out_nothing(runner_client, queue_run, room):
    queue_run(provider="claude")
    before = world_state()

    response = runner_client.post(NEXT, {"wait": 0, "room": room}, format="json")

    assert response.status_code == 400
    assert "room" in response.json()["errors"]
    assert world_state() == before


def test_a_heartbeat_keeps_memory_room_and_load(runner_client):
    body = {"room": {"claude": 0, "demo": 7}, "memory": MEMORY, "load": 0.42}

    response = runner_client.post(BEAT, body, format="json")

    assert response.status_code == 200, response.json()
    stored = Runner.objects.get(pk=runner_client.runner.pk)
    assert (stored.room, stored.memory, stored.load) == ({"claude": 0, "demo": 7}, MEMORY, 0.42)
    assert response.json()["runner"]["memory"] == MEMORY
    # a heartbeat that leaves them out keeps them
    runner_client.post(BEAT, {"capacity": 3}, format="json")
    assert Runner.objects.get(pk=runner_client.runner.pk).memory == MEMORY


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"memory": {**MEMORY, "available_mb": 5000}}, "memory"),  # more available than in all
        ({"memory": {"available_mb": 10}}, "memory"),
        ({"memory": {**MEMORY, "swap_mb": 1}}, "memory"),
        ({"memory": {**MEMORY, "needs_mb": {"claude": -1}}}, "memory"),
        ({"load": -1}, "load"),
        ({"load": "high"}, "load"),
        ({"room": {"claude": -1}}, "room"),
    ],
)
def test_a_bad_machine_report_is_400_and_changes_nothing(runner_client, body, field):
    before = (world_state(), list(Runner.objects.values("room", "memory", "load")))

    response = runner_client.post(BEAT, body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert (world_state(), list(Runner.objects.values("room", "memory", "load"))) == before


# --- what people see ---------------------------------------------------------------------------------


@pytest.fixture
def page_client(client):
    user = user_in(ENGINEERS, username="erin")
    user.is_staff = True
    user.save()
    client.force_login(user)
    return client


def _machine(runner, *, room, memory, load=0.5, name=None):
    if name:
        runner.name = name
    runner.status = Runner.Status.ONLINE
    runner.providers = ["demo", "claude"]
    runner.room, runner.memory, runner.load = room, memory, load
    runner.last_seen_at = timezone.now()
    runner.save()
    return runner


def _card(client, run) -> str:
    response = client.get(f"/runners/tasks/{run.task_id}/run/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_run_queued_for_memory_says_which_runner_lacks_how_much(page_client, runner, queue_run):
    _machine(runner, room={"claude": 0, "demo": 7}, memory={**MEMORY, "available_mb": 1300, "reserved_mb": 100})
    run = queue_run(provider="claude")

    html = _card(page_client, run)

    assert "Waiting for a runner with room: build-1 offers claude, which needs 512 MB; it has 176 MB to spare" in html
    assert "(1300 MB available, 1024 MB kept free)" in html
    assert "Waiting for a runner that offers" not in html


def test_a_provider_bigger_than_any_machine_says_so_and_the_run_stays_queued(page_client, runner, queue_run):
    _machine(runner, room={"claude": 0}, memory={**MEMORY, "needs_mb": {"claude": 8000}})
    run = queue_run(provider="claude")

    html = _card(page_client, run)

    assert (
        "No runner&#x27;s machine has room for a claude run: it needs 8000 MB and the largest, build-1, allows" in html
    )
    assert "allows 2976 MB (4000 MB in all, 1024 MB kept free)" in html
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_a_runner_with_room_or_without_a_memory_report_leaves_the_usual_text(
    page_client, runner, other_runner_client, queue_run
):
    _machine(runner, room={"claude": 0}, memory=MEMORY)
    other = other_runner_client.runner
    run = queue_run(provider="claude")

    # build-2 says nothing of memory: it may take it
    assert "Waiting for a runner that offers <code>claude</code>" in _card(page_client, run)
    # build-2 has room
    Runner.objects.filter(pk=other.pk).update(room={"claude": 2}, memory=MEMORY)
    html = _card(page_client, run)
    assert "Waiting for a runner that offers <code>claude</code>" in html and "with room" not in html
    # both lack it: the one closest to room is named
    Runner.objects.filter(pk=other.pk).update(room={"claude": 0}, memory={**MEMORY, "available_mb": 1520})
    assert "Waiting for a runner with room: build-2 offers claude" in _card(page_client, run)


def test_the_runners_page_shows_memory_and_load_and_escapes_provider_names(page_client, runner):
    _machine(runner, room={"claude": 0, "<b>x</b>": 0}, memory=MEMORY, load=1.234)

    html = page_client.get("/runners/").content.decode()

    assert "1500 / 4000 MB free" in html
    assert "load 1.23" in html
    assert "no room for claude" in html
    assert "no room for &lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
