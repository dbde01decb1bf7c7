"""Writes for tasks and campaigns: create, claim, release, complete, fail."""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from board.claim_gates import ClaimRefusal, claim_condition_reason, claim_conditions_sql, claim_refusal
from board.claim_sql import claim_in_one_statement, claim_take_params, claim_take_sql
from board.live import board_push_tasks
from board.models import Campaign, Lead, Task, TaskClaim
from config.actors import Actor
from config.api.errors import LEASE_LOST, DomainError
from config.pages import BOARD, user_may
from config.run_scope import require_no_claims, require_task
from config.single_statement import single_statement_atomic
from config.speed.prepared import prepared_statements
from ledger.events import event_dispatch, event_record
from sessions_app.models import Agent, AgentSession
from workspaces.models import Repository

RANK_STEP = 1024
CLAIM_ATTEMPTS = 20
PRIORITY_WORDS = {"critical": "P0", "urgent": "P0", "high": "P1", "medium": "P2", "normal": "P2", "low": "P3"}


def priority_normalise(value: str | None, *, default: str = "P2") -> str:
    """P0..P3 from a P-code or a word (critical, high, medium, low)."""
    if not value:
        return default
    text = value.strip()
    if text.upper() in Task.Priority.values:
        return text.upper()
    word = PRIORITY_WORDS.get(text.lower())
    if word is None:
        raise DomainError(f"Unknown priority {value!r}; use P0-P3 or critical, high, medium, low.")
    return word


def require_orchestrator(*, actor: Actor, what: str) -> None:
    """Staff, or an agent key with the 'orchestrate' scope; the API checks it before reading the body."""
    if not actor.can_orchestrate:
        raise DomainError(f"{what} needs staff or an agent key with the 'orchestrate' scope.", code="forbidden")


def _next_rank(status: str) -> int:
    top = Task.objects.filter(status=status).aggregate(top=Max("rank"))["top"]
    return (top or 0) + RANK_STEP


def task_event(name: str, task: Task, actor: Actor, **payload) -> None:
    event_record(
        name=name,
        subject_type="task",
        subject_id=task.pk,
        actor=actor.label,
        payload={"title": task.title[:200], "status": task.status, **payload},
    )


@transaction.atomic
def task_create(
    *,
    actor: Actor,
    title: str,
    description: str = "",
    status: str = Task.Status.READY,
    priority: str = Task.Priority.P2,
    labels: list[str] | None = None,
    campaign: Campaign | None = None,
    suggested_agent: str = "",
    source_file: str = "",
    source_key: str = "",
    external_id: str = "",
    repository: Repository | None = None,
) -> Task:
    # People of the board create tasks from its "+ New task" form; the API asks for staff or an
    # orchestrating key before it reads the body (board/api/views.py).
    require_board_editor(actor=actor, what="Creating tasks")
    if status not in (Task.Status.BACKLOG, Task.Status.READY, Task.Status.BLOCKED):
        raise DomainError("A new task starts in backlog, ready or blocked.")
    try:
        # A savepoint, so a duplicate identity is a 409 and not a broken outer transaction.
        with transaction.atomic():
            task = Task.objects.create(
                title=title,
                description=description,
                status=status,
                priority=priority,
                rank=_next_rank(status),
                labels=labels or [],
                campaign=campaign,
                repository=repository,
                suggested_agent=suggested_agent,
                source_file=source_file,
                source_key=source_key,
                external_id=external_id,
            )
    except IntegrityError:
        identity = {"external_id": external_id, "source_key": source_key}
        taken = [name for name, value in identity.items() if value and Task.objects.filter(**{name: value}).exists()]
        raise DomainError(
            f"A task with this {' and '.join(taken) or 'identity'} already exists.",
            code="conflict",
            extra={"errors": {name: ["Already used by another task."] for name in taken}},
        ) from None
    task_event("task.created", task, actor)
    board_push_tasks(task_ids=[task.pk])
    return task


_CLAIM_SET = "status = %s, assignee_id = %s, session_id = %s, started_at = %s, updated_at = %s, error = ''"
# The status is written into the SQL, not bound: the ready queue's partial index names it, and a
# prepared claim (below) keeps one plan with that index only when the statement names it too.
_CLAIMABLE = f"status = '{Task.Status.READY}' AND assignee_id IS NULL"


def _claim_take(
    *, where: str, params: list, agent: Agent, session: AgentSession | None, actor: Actor, checked: bool = False
) -> Task | None:
    """Take a ready, unheld task matching ``where`` for ``agent``: task, open claim, ledger event, push.

    The conditional UPDATE ... RETURNING is the lock: of two claimants, the database lets exactly
    one change the row; the partial unique index on open claims backs it up. On PostgreSQL the
    claim row and the event are inserted by the same statement (board/claim_sql.py), one round
    trip instead of three while the row is locked; elsewhere (SQLite) they follow the UPDATE.
    ``checked``: ``where`` itself picks only a claimable row, under its lock (see _claim_best).
    """
    db = transaction.get_connection()  # once: each use of the `connection` proxy looks it up again
    table = db.ops.quote_name(Task._meta.db_table)
    now = db.ops.adapt_datetimefield_value(timezone.now())
    session_id = session.pk if session else None
    condition = where if checked else f"{_CLAIMABLE} AND {where}"
    update = f"UPDATE {table} SET {_CLAIM_SET} WHERE {condition} RETURNING *"
    head = [Task.Status.IN_PROGRESS, agent.pk, session_id, now, now]
    if not claim_in_one_statement(db):
        rows = list(Task.objects.raw(update, head + params))
        return _claim_opened(task=rows[0], agent=agent, session=session, actor=actor) if rows else None
    tail = claim_take_params(
        db, agent_id=agent.pk, agent_slug=agent.slug, session_id=session_id, actor=actor.label, now=now
    )
    with prepared_statements(db):  # planned once per connection (config/speed/prepared.py)
        rows = list(Task.objects.raw(claim_take_sql(update), head + params + tail))
    if not rows:
        return None
    task = _claimed(task=rows[0], agent=agent, session=session)
    event_dispatch(event_id=task.claimed_event_id)
    board_push_tasks(task_ids=[task.pk])
    return task


def _claimed(*, task: Task, agent: Agent, session: AgentSession | None) -> Task:
    task.assignee = agent  # the row has its id; the output shows its slug without another query
    task.session = session
    if session is not None and session.task_id != task.pk:
        # The session works on this task now (`session start`, then `task claim-next`): the usage it
        # reports from here on (tokens, cost) rolls up to the task and counts against its budgets.
        AgentSession.objects.filter(pk=session.pk).update(task_id=task.pk)
        session.task_id = task.pk
    return task


def task_session_follow(*, session: AgentSession) -> None:
    """A session opened on a task its agent holds: the card follows it (its status, its questions),
    the newest of the agent's sessions on the task. Caller holds the session's opening transaction."""
    moved = (
        Task.objects.filter(pk=session.task_id, assignee_id=session.agent_id, status=Task.Status.IN_PROGRESS)
        .exclude(session_id=session.pk)
        .update(session=session, updated_at=timezone.now())
    )
    if moved:
        board_push_tasks(task_ids=[session.task_id])


def _claim_opened(*, task: Task, agent: Agent, session: AgentSession | None, actor: Actor) -> Task:
    task = _claimed(task=task, agent=agent, session=session)
    TaskClaim.objects.create(task_id=task.pk, agent=agent, session=session)
    task_event("task.claimed", task, actor, agent=agent.slug, session=session.pk if session else None)
    board_push_tasks(task_ids=[task.pk])
    return task


def _claim(*, task_id: int, agent: Agent, session: AgentSession | None, actor: Actor) -> Task | None:
    """Take this task if it is ready, unheld and the registered conditions let this agent have it
    (board/claim_gates.py: a task with an active run is its run's). Caller holds a transaction."""
    db = transaction.get_connection()
    conditions, ids = claim_conditions_sql(table=db.ops.quote_name(Task._meta.db_table), by_id=True)
    return _claim_take(
        where=f"id = %s{conditions}", params=[task_id] + [agent.pk] * ids, agent=agent, session=session, actor=actor
    )


def _claim_best(
    *,
    agent: Agent,
    session: AgentSession | None,
    campaign: Campaign | None,
    actor: Actor,
    refused: ClaimRefusal | None = None,
) -> Task | None:
    """Pick and take the best ready task in one statement. Caller holds a transaction (or, on
    PostgreSQL, autocommit: see single_statement_atomic).

    On PostgreSQL the pick skips rows other claimants hold locked (SKIP LOCKED), so they
    don't queue on one row; on SQLite the IMMEDIATE transaction serialises writers.

    The pick checks that the task is claimable while it locks the row (FOR UPDATE re-checks a row
    changed meanwhile), so the UPDATE has only ``id = (pick)`` to match: with the claimable test
    repeated there, PostgreSQL could choose the (status, rank) index for the UPDATE and filter
    every ready task by id, one claim costing as much as the queue is long.
    """
    db = transaction.get_connection()
    table = db.ops.quote_name(Task._meta.db_table)
    lock = " FOR UPDATE SKIP LOCKED" if db.features.has_select_for_update_skip_locked else ""
    campaign_filter = " AND campaign_id = %s" if campaign is not None else ""
    params = [agent.slug] + ([campaign.pk] if campaign is not None else [])
    if refused is not None:
        # Tasks the gates leave alone (exceeded budgets): part of the pick both claim paths share.
        for column, ids in (("campaign_id", refused.campaign_ids), ("id", refused.task_ids)):
            if ids:
                campaign_filter += f" AND ({column} IS NULL OR {column} NOT IN ({', '.join(['%s'] * len(ids))}))"
                params += sorted(ids)
    # The registered conditions (a task with an active run is left to its run) take no parameters here.
    conditions, _ = claim_conditions_sql(table=table, by_id=False)
    pick = (
        f"id = (SELECT id FROM {table} WHERE {_CLAIMABLE} AND (suggested_agent = '' OR suggested_agent = %s)"
        f"{campaign_filter}{conditions} ORDER BY priority, rank, id LIMIT 1{lock})"
    )
    return _claim_take(where=pick, params=params, agent=agent, session=session, actor=actor, checked=True)


def _check_claimant(*, agent: Agent, session: AgentSession | None) -> None:
    if session is not None and session.agent_id != agent.pk:
        raise DomainError("The session belongs to another agent.", code="forbidden")
    if session is not None and session.is_terminal:
        raise DomainError(f"Session {session.pk!r} is {session.status}.", code="conflict")
    if agent.status == Agent.Status.PAUSED:
        raise DomainError(f"Agent {agent.slug!r} is paused and takes no work.", code="conflict")


def _claim_refused(*, agent: Agent, campaign: Campaign | None) -> ClaimRefusal | None:
    """What the gates of apps above board (usage's budgets: board/claim_gates.py) keep from this agent;
    a 409 saying why when that is everything it asked for."""
    refused = claim_refusal(agent=agent)
    if refused is None:
        return None
    if refused.reason:
        raise DomainError(f"Agent {agent.slug!r} is handed no new task: {refused.reason}", code="conflict")
    if campaign is not None and campaign.pk in refused.campaign_ids:
        raise DomainError(
            f"Campaign {campaign.pk} hands out no new task: its budget is exceeded; raise it to go on.",
            code="conflict",
        )
    return refused


def task_claim_next(
    *, actor: Actor, agent: Agent, session: AgentSession | None = None, campaign: Campaign | None = None
) -> Task | None:
    """Claim the best ready task: highest priority, then best rank, then oldest. None if there is none.

    Tasks suggested for another agent are left to it, tasks an exceeded budget stops are left alone,
    and so are tasks a registered condition keeps for someone else (a task with an active run is left
    to its run): board/claim_gates.py.
    """
    require_no_claims(actor=actor, what="claim-next")
    _check_claimant(agent=agent, session=session)
    refused = _claim_refused(agent=agent, campaign=campaign)
    for _ in range(CLAIM_ATTEMPTS):
        try:
            with single_statement_atomic():  # the claim is one statement on PostgreSQL (_claim_take)
                task = _claim_best(agent=agent, session=session, campaign=campaign, actor=actor, refused=refused)
            return task
        except IntegrityError:
            continue  # an open claim on that task already existed; pick again
    raise DomainError("Too many claimants at once; retry.", code="conflict")


def _claim_by_id_refused(*, agent: Agent, task: Task) -> None:
    """claim-next's gates on one task: a 409 with the gate's reason (an exceeded budget of the agent, the
    day, the task or its campaign), nothing written. A claim the agent holds already stays a no-op."""
    refused = claim_refusal(agent=agent)
    why = refused.task_reason(task_id=task.pk, campaign_id=task.campaign_id) if refused is not None else ""
    if not why:
        return
    task.refresh_from_db()
    if task.status == Task.Status.IN_PROGRESS and task.assignee_id == agent.pk:
        return
    if refused.reason:
        raise DomainError(f"Agent {agent.slug!r} is handed no new task: {why}", code="conflict")
    raise DomainError(f"Task {task.pk} can't be claimed: {why}", code="conflict")


def task_claim(*, actor: Actor, agent: Agent, task: Task, session: AgentSession | None = None) -> tuple[Task, bool]:
    """Claim this task; True if this call claimed it. Claiming what you already hold is a no-op.

    A task claim-next would leave alone (the gates: board/claim_gates.py) is refused, naming why; so
    is one a registered condition keeps from this agent (a task with an active run is its run's).
    """
    require_no_claims(actor=actor, what=f"claim of task {task.pk}")
    _check_claimant(agent=agent, session=session)
    _claim_by_id_refused(agent=agent, task=task)
    try:
        with transaction.atomic():
            claimed = _claim(task_id=task.pk, agent=agent, session=session, actor=actor)
    except IntegrityError:
        claimed = None
    if claimed is not None:
        return claimed, True
    task.refresh_from_db()
    if task.status == Task.Status.IN_PROGRESS and task.assignee_id == agent.pk:
        return task, False
    why = claim_condition_reason(task_id=task.pk, agent=agent) if task.status == Task.Status.READY else ""
    if why:
        raise DomainError(f"Task {task.pk} can't be claimed: {why}", code="conflict")
    holder = f", held by {task.assignee.slug}" if task.assignee_id else ""
    raise DomainError(f"Task {task.pk} is {task.status}{holder}; only ready tasks can be claimed.", code="conflict")


def end_claim(*, actor: Actor, task: Task, outcome: str, new_status: str, error: str = "") -> tuple[Task, bool]:
    """Close the open claim and move the task. Locks the task row (caller holds a transaction)."""
    require_task(actor=actor, task_id=task.pk)  # a per-run key ends only its run's task (SPEC §8)
    task = Task.objects.select_for_update().get(pk=task.pk)
    claim = TaskClaim.objects.filter(task=task, released_at__isnull=True).first()
    if claim is None or task.status != Task.Status.IN_PROGRESS:
        last = TaskClaim.objects.filter(task=task).order_by("-claimed_at", "-id").first()
        if last is not None and last.outcome == outcome and task.status == new_status and actor.owns(last.agent_id):
            return task, False  # a retry of the same ending
        _refuse_if_lease_lost(actor=actor, task=task)
        raise DomainError(
            f"Task {task.pk} is {task.status} and not claimed; nothing to {outcome_verb(outcome)}.", code="conflict"
        )
    if not actor.owns(claim.agent_id):
        _refuse_if_lease_lost(actor=actor, task=task)  # taken back from this agent, then claimed by another
        raise DomainError(f"Task {task.pk} is claimed by another agent.", code="forbidden")
    now = timezone.now()
    claim.outcome = outcome
    claim.released_at = now
    claim.save(update_fields=["outcome", "released_at"])
    task.status = new_status
    task.updated_at = now
    update = ["status", "updated_at"]
    if new_status == Task.Status.READY:
        task.assignee = None
        task.session = None
        update += ["assignee", "session"]
    if new_status in (Task.Status.DONE, Task.Status.FAILED, Task.Status.REVIEW):
        task.finished_at = now
        update.append("finished_at")
    if outcome == TaskClaim.Outcome.FAILED:
        task.error = error
        task.retries += 1
        update += ["error", "retries"]
    if new_status == Task.Status.READY:
        task.rank = _next_rank(Task.Status.READY) if outcome == TaskClaim.Outcome.FAILED else task.rank
        update.append("rank")
    task.save(update_fields=update)
    board_push_tasks(task_ids=[task.pk])
    return task, True


def _refuse_if_lease_lost(*, actor: Actor, task: Task) -> None:
    """A 409 ``lease_lost`` when the agent's own last claim on the task was taken back by the reaper.

    Its holder learns why its write is refused (no heartbeat for HEARTBEAT_TTL_SECONDS) and what
    to do (claim it again), in a form its client can recognise: ``code`` in the body.
    """
    if actor.agent is None:
        return
    mine = TaskClaim.objects.filter(task=task, agent=actor.agent).order_by("-claimed_at", "-id").first()
    if mine is None or mine.outcome != TaskClaim.Outcome.EXPIRED:
        return
    ttl = settings.HEARTBEAT_TTL_SECONDS
    raise DomainError(
        f"Your claim on task {task.pk} was lost at {mine.released_at.isoformat()} because Switchyard heard "
        f"nothing from {actor.agent.slug!r} for {ttl} s; the task went back to ready. Claim it again.",
        code="conflict",
        extra={"code": LEASE_LOST, "task": task.pk, "lost_at": mine.released_at.isoformat(), "ttl_seconds": ttl},
    )


def outcome_verb(outcome: str) -> str:
    return {"released": "release", "completed": "complete", "failed": "fail"}.get(outcome, outcome)


@transaction.atomic
def task_release(*, actor: Actor, task: Task) -> tuple[Task, bool]:
    task, changed = end_claim(actor=actor, task=task, outcome=TaskClaim.Outcome.RELEASED, new_status=Task.Status.READY)
    if changed:
        task_event("task.released", task, actor)
    return task, changed


def task_claims_release_for_session(*, actor: Actor, session: AgentSession) -> int:
    """Give back every task a session still holds (it was cancelled or failed). Returns how many."""
    released = 0
    for task in Task.objects.filter(session=session, status=Task.Status.IN_PROGRESS).order_by("pk"):
        _, changed = task_release(actor=actor, task=task)
        released += int(changed)
    return released


@transaction.atomic
def task_complete(*, actor: Actor, task: Task, review: bool = False) -> tuple[Task, bool]:
    new_status = Task.Status.REVIEW if review else Task.Status.DONE
    task, changed = end_claim(actor=actor, task=task, outcome=TaskClaim.Outcome.COMPLETED, new_status=new_status)
    if changed:
        task_event("task.moved", task, actor, to=new_status)
    return task, changed


@transaction.atomic
def task_fail(*, actor: Actor, task: Task, error: str, retry: bool = False) -> tuple[Task, bool]:
    new_status = Task.Status.READY if retry else Task.Status.FAILED
    task, changed = end_claim(
        actor=actor, task=task, outcome=TaskClaim.Outcome.FAILED, new_status=new_status, error=error
    )
    if changed:
        task_event("task.moved", task, actor, to=new_status, error=error[:500])
    return task, changed


def require_board_editor(*, actor: Actor, what: str) -> None:
    """Who may edit a task's settings: a person who works the board (product owners and engineers,
    on the card panel), staff, or an orchestrating agent key."""
    if actor.can_orchestrate:
        return  # before the groups: staff need not be in one (and no query is made for them)
    if actor.agent is None and actor.user is not None and user_may(actor.user, BOARD):
        return
    require_orchestrator(actor=actor, what=what)


@transaction.atomic
def task_set_repository(*, actor: Actor, task: Task, repository: Repository | None) -> tuple[Task, bool]:
    """Name the repository the task's runs work in, or none (its session workspace); True if it changed.

    Locks the task row, so two people setting it at once record one event each in order. A run
    already going keeps the workdir it started in: the next run uses the new repository.
    """
    require_board_editor(actor=actor, what="Setting a task's repository")
    # of=self: PostgreSQL cannot lock the nullable side of the outer join to the repository.
    task = Task.objects.select_for_update(of=("self",)).select_related("repository").get(pk=task.pk)
    previous = task.repository
    if (previous.pk if previous else None) == (repository.pk if repository else None):
        return task, False
    task.repository = repository
    task.save(update_fields=["repository", "updated_at"])
    task_event(
        "task.repository_set",
        task,
        actor,
        repository=repository.name if repository else None,
        **{"from": previous.name if previous else None},
    )
    board_push_tasks(task_ids=[task.pk])
    return task, True


@transaction.atomic
def campaign_create(
    *,
    actor: Actor,
    type: str,
    name: str = "",
    priority: str | None = None,
    deliverables: list[str] | None = None,
    target_audience: str = "",
    goal: str = "",
    starts_on=None,
    ends_on=None,
    leads: list[dict] | None = None,
    source_file: str = "",
    repository: Repository | None = None,
) -> Campaign:
    """A campaign with one ready task per deliverable, and its leads."""
    require_orchestrator(actor=actor, what="Creating campaigns")
    if starts_on and ends_on and ends_on < starts_on:
        raise DomainError("ends_on is before starts_on.")
    code = priority_normalise(priority)
    deliverables = deliverables or []
    campaign = Campaign.objects.create(
        name=name or type,
        type=type,
        priority=code,
        deliverables=deliverables,
        target_audience=target_audience,
        goal=goal,
        starts_on=starts_on,
        ends_on=ends_on,
        source_file=source_file,
    )
    for deliverable in deliverables:
        task_create(
            actor=actor,
            title=f"{campaign.name}: {deliverable}",
            description=goal,
            priority=code,
            labels=[type, deliverable],
            campaign=campaign,
            repository=repository,
        )
    Lead.objects.bulk_create(
        Lead(
            campaign=campaign,
            name=lead["name"],
            company=lead.get("company", ""),
            email=lead.get("email", ""),
            status=lead.get("status") or Lead.Status.NEW,
            score=lead.get("score") or 0,
        )
        for lead in (leads or [])
    )
    event_record(
        name="campaign.created",
        subject_type="campaign",
        subject_id=campaign.pk,
        actor=actor.label,
        payload={"name": campaign.name, "deliverables": len(deliverables)},
    )
    return campaign
