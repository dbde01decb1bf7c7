"""One holder at a time (SPEC §7) for worktrees, with real threads on real database connections.

Each thread has its own connection (closed at its end) and its own agent; a Barrier
releases them together so the claims really overlap. Runs on SQLite (IMMEDIATE
transactions serialise writers) and on PostgreSQL (the row lock and the conditional UPDATE).
"""

import random
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection

from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import Event
from tests.factories import AgentFactory
from tests.threads import run_together
from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees.claims import worktree_claim, worktree_release
from workspaces.worktrees.services import worktree_create

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]

THREADS = 16


@pytest.fixture
def worktree(repository):
    worktree, _ = worktree_create(
        actor=Actor(agent=AgentFactory(slug="maker")), repository=repository, type="feat", name="race"
    )
    return worktree


@pytest.mark.parametrize("round_", range(3))
def test_sixteen_agents_race_for_one_worktree_and_exactly_one_wins(worktree, round_):
    # given
    agents = [AgentFactory(slug=f"racer-{n:02d}") for n in range(THREADS)]
    won: list[str] = []
    refused: list[DomainError] = []

    # when they all claim at once
    def claim(agent):
        mine = Worktree.objects.get(pk=worktree.pk)
        try:
            result = worktree_claim(actor=Actor(agent=agent), agent=agent, worktree=mine)
        except DomainError as exc:
            refused.append(exc)
        else:
            assert result.outcome == "granted"
            won.append(agent.slug)

    errors = run_together(claim, agents)

    # then one holds it and fifteen were told who does
    assert errors == []
    assert len(won) == 1
    assert len(refused) == THREADS - 1
    assert {exc.code for exc in refused} == {"conflict"}
    assert {exc.extra["holder"] for exc in refused} == {won[0]}
    assert Worktree.objects.get(pk=worktree.pk).holder.slug == won[0]
    claimed = Event.objects.filter(name="worktree.claimed")
    assert [e.payload["agent"] for e in claimed] == won
    assert WorktreeClaimRequest.objects.count() == 0


def test_sixteen_waiting_agents_are_each_granted_once_in_fifo_order(worktree):
    # given 16 agents that all claim with wait=True at once
    agents = [AgentFactory(slug=f"waiter-{n:02d}") for n in range(THREADS)]
    places: dict[str, int] = {}
    granted_order: list[str] = []
    guard = threading.Lock()
    holding: set[str] = set()
    overlaps: list[set[str]] = []
    all_queued = threading.Barrier(THREADS)

    def claim_wait_and_release(agent):
        actor = Actor(agent=agent)
        result = worktree_claim(actor=actor, agent=agent, worktree=Worktree.objects.get(pk=worktree.pk), wait=True)
        places[agent.slug] = 0 if result.outcome == "granted" else result.position
        all_queued.wait(timeout=60)  # everyone has claimed before the first release
        # wait for the grant (a release by the agent before us hands it over)
        deadline = time.monotonic() + 120
        while not Worktree.objects.filter(pk=worktree.pk, holder=agent).exists():
            assert time.monotonic() < deadline, f"{agent.slug} was never granted"
            time.sleep(0.005)
        with guard:
            holding.add(agent.slug)
            if len(holding) > 1:
                overlaps.append(set(holding))
            granted_order.append(agent.slug)
        time.sleep(0.002)  # "work" while holding it
        with guard:
            holding.discard(agent.slug)
        worktree_release(actor=actor, worktree=Worktree.objects.get(pk=worktree.pk))

    # when each then releases in turn
    errors = run_together(claim_wait_and_release, agents)

    # then
    assert errors == []
    assert overlaps == []
    assert sorted(places.values()) == list(range(THREADS))  # one winner, then places 1..15
    expected = sorted(places, key=places.get)
    assert granted_order == expected
    assert len(set(granted_order)) == THREADS
    # and the event log shows one holder at a time: claimed, released, claimed, ...
    events = Event.objects.filter(name__in=["worktree.claimed", "worktree.released"]).order_by("id")
    names = [e.name for e in events]
    assert names == ["worktree.claimed", "worktree.released"] * THREADS
    assert [e.payload["agent"] for e in events if e.name == "worktree.claimed"] == expected
    assert list(WorktreeClaimRequest.objects.order_by("id").values_list("agent__slug", "status")) == [
        (slug, "granted") for slug in expected[1:]
    ]
    row = Worktree.objects.get(pk=worktree.pk)
    assert (row.holder_id, row.lease_expires_at) == (None, None)


def test_agents_claiming_queueing_and_releasing_at_random_keep_one_holder_and_strand_nobody(repository, actor):
    # given two worktrees and eight agents; on PostgreSQL most grants and releases are one
    # statement each (decided on an unlocked read), the rest under the row lock
    worktrees = [
        worktree_create(actor=actor, repository=repository, type="feat", name=f"mix-{n}")[0].pk for n in range(2)
    ]
    agents = [AgentFactory(slug=f"mixer-{n:02d}") for n in range(8)]

    # when each claims one at random, a third of the time queueing for it, twenty times, and
    # releases whatever it got (a queued agent first waits for its grant)
    def work(agent):
        rng = random.Random(agent.slug)
        me = Actor(agent=agent)
        for _ in range(20):
            target, wait = rng.choice(worktrees), rng.random() < 0.3
            try:
                result = worktree_claim(actor=me, agent=agent, worktree=target, wait=wait)
            except DomainError as exc:
                assert exc.code == "conflict"
                continue
            deadline = time.monotonic() + 60
            while result.outcome == "queued" and not Worktree.objects.filter(pk=target, holder=agent).exists():
                assert time.monotonic() < deadline, f"{agent.slug} was left waiting for worktree {target}"
                time.sleep(0.002)
            worktree_release(actor=me, worktree=target)

    errors = run_together(work, agents)

    # then nobody was left in a queue, both are free, and each worktree's log alternates
    # claimed / released, every release naming the holder the claim before it granted
    assert errors == []
    assert not WorktreeClaimRequest.objects.filter(status=WorktreeClaimRequest.Status.WAITING).exists()
    assert list(Worktree.objects.filter(pk__in=worktrees).values_list("holder_id", flat=True)) == [None, None]
    for pk in worktrees:
        names = ("worktree.claimed", "worktree.released")
        log = Event.objects.filter(subject_type="worktree", subject_id=str(pk), name__in=names).order_by("id")
        assert [e.name for e in log] == list(names) * (len(log) // 2)
        holders = [e.payload["holder"] for e in log]
        assert holders[0::2] == holders[1::2]
        assert len(log) >= 2


def test_concurrent_creates_of_one_worktree_make_one_row_and_one_folder(repository, code_dir):
    # given
    agents = [AgentFactory(slug=f"maker-{n}") for n in range(4)]
    results: list[tuple[int, bool]] = []

    # when they all ask for feat-same at once
    def create(agent):
        worktree, created = worktree_create(actor=Actor(agent=agent), repository=repository, type="feat", name="same")
        results.append((worktree.pk, created))

    errors = run_together(create, agents)

    # then
    assert errors == []
    assert len({pk for pk, _ in results}) == 1
    assert sorted(created for _, created in results) == [False, False, False, True]
    assert Worktree.objects.count() == 1
    assert (code_dir / "feat-same").is_dir()
    assert Event.objects.filter(name="worktree.created").count() == 1


def test_eight_worktrees_made_at_once_in_one_clone_all_succeed(repository):
    # given eight agents, each with its own task's worktree to make in the same clone
    agents = [AgentFactory(slug=f"maker-{n}") for n in range(8)]

    # when they all make theirs at once (git writes .git/worktrees/<name>/ in steps)
    def make(agent):
        worktree_create(actor=Actor(agent=agent), repository=repository, type="task", name=agent.slug)

    errors = run_together(make, agents)

    # then every one was made, and git knows every folder
    assert errors == []
    rows = Worktree.objects.filter(repository=repository, status=Worktree.Status.ACTIVE)
    assert rows.count() == 8
    listed = subprocess.run(
        ["git", "-C", repository.path, "worktree", "list", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout
    for row in rows:
        assert f"worktree {row.real_path}\n" in listed


def test_a_worktree_is_made_only_once_another_process_lets_go_of_the_clone(repository):
    # given another process (a runner on this machine) in the middle of a worktree change
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX);"
            " print('held', flush=True); sys.stdin.readline()",
            repository.path,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        done = threading.Event()
        failures: list[BaseException] = []

        waiter = AgentFactory(slug="waiter")

        def make():
            try:
                worktree_create(actor=Actor(agent=waiter), repository=repository, type="task", name="late")
            except BaseException as exc:
                failures.append(exc)
            finally:
                connection.close()  # this thread's own
                done.set()

        maker = threading.Thread(target=make)
        maker.start()

        # when it still holds the clone, nothing is made; then it lets go
        assert not done.wait(0.5)
        assert not Worktree.objects.filter(name="late").exists()
        holder.stdin.write("\n")
        holder.stdin.flush()

        # then the worktree is made
        assert done.wait(30)
        maker.join()
        assert failures == []
        assert Worktree.objects.get(name="late").status == Worktree.Status.ACTIVE
    finally:
        holder.kill()
        holder.wait()
