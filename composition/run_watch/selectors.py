"""Reads for the run watch on a task's panel: the run watched (the active one, else the last), its
conversation, tokens and cost so far, and every attempt at the task. Here in composition because
the cost is usage's and the tool calls the ledger's, both beside runners."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.db.models import Count, Max
from django.utils import timezone

from board.models import Task
from composition.run_watch.conversation import run_conversation, run_totals
from composition.run_watch.items import Conversation
from ledger.models import ToolInvocation
from runners.models import Run
from runners.run_lifecycle import summary_text
from sessions_app.logs import session_log_tail_offset
from sessions_app.models import StreamEvent
from usage.models import TOKEN_FIELDS, UsageRecord
from usage.selectors import usage_by_session

ATTEMPTS_MAX = 50
TOTALS_READ_MAX = 10  # attempts whose log tail is read for their totals, when usage has none
# A runner reports a run's end, then ships what the agent's children wrote after its last tick (the
# client's runner/worker.py), and a final ship that failed is retried then: the raw log is followed
# this long after the end.
LOG_LATE_SECONDS = 30


def run_log_following(*, run: Run, now=None) -> bool:
    """Whether the raw log of ``run`` may still grow: it is active, or it ended LOG_LATE_SECONDS ago at most."""
    if run.is_active:
        return True
    if run.ended_at is None:
        return False
    return (now or timezone.now()) - run.ended_at < timedelta(seconds=LOG_LATE_SECONDS)


@dataclass
class Attempt:
    run: Run
    tokens: int | None
    cost_usd: Decimal | None
    seconds: int | None

    @property
    def summary(self) -> str:
        text = summary_text(self.run.summary or {}) if self.run.summary else ""
        return text.removeprefix("Run finished: ").removeprefix("Run finished.")


@dataclass
class RunWatch:
    task: Task
    run: Run | None  # the run watched: the active one, else the latest
    conversation: Conversation = field(default_factory=Conversation)
    attempts: list[Attempt] = field(default_factory=list)
    tokens: int = 0
    cost_usd: Decimal | None = None
    digest: str = ""  # changes whenever what the watch shows may have

    @property
    def active(self) -> bool:
        return self.run is not None and self.run.is_active


def _seconds(run: Run) -> int | None:
    if run.started_at is None:
        return None
    return max(0, int(((run.ended_at or timezone.now()) - run.started_at) / timedelta(seconds=1)))


def _runs(task: Task) -> list[Run]:
    runs = Run.objects.filter(task=task).select_related("runner", "session__agent").order_by("-created_at", "-id")
    return list(runs[:ATTEMPTS_MAX])


def watch_digest(*, task: Task) -> tuple[list[Run], str]:
    """The task's runs and a digest of everything the watch shows of them (the runs' states, the
    watched session's log size, events and tool calls, its usage): equal digests, nothing to redraw."""
    runs = _runs(task)
    parts = [f"{run.pk}:{run.status}:{run.attempt}:{run.cancel_requested_at}:{run.updated_at}" for run in runs]
    if runs and runs[0].session is not None:
        session = runs[0].session
        parts.append(str(session_log_tail_offset(session=session, window=0)))
        parts.append(str(StreamEvent.objects.filter(session=session).aggregate(Max("seq"))["seq__max"]))
        calls = ToolInvocation.objects.filter(session=session).aggregate(n=Count("id"), done=Max("finished_at"))
        parts.append(f"{calls['n']}:{calls['done']}")
        parts.append(str(session.status))
        parts.append(str(UsageRecord.objects.filter(session=session).count()))
    return runs, hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]


def run_watch(*, task: Task) -> RunWatch:
    runs, digest = watch_digest(task=task)
    usage = usage_by_session(session_ids=[run.session_id for run in runs if run.session_id])
    attempts = []
    for run in runs:
        found = usage.get(run.session_id)
        tokens = sum(int(found[name] or 0) for name in TOKEN_FIELDS) if found else None
        attempts.append(
            Attempt(run=run, tokens=tokens, cost_usd=found["cost_usd"] if found else None, seconds=_seconds(run))
        )
    watched = next((run for run in runs if run.is_active), runs[0] if runs else None)
    watch = RunWatch(task=task, run=watched, attempts=attempts, digest=digest)
    if watched is None:
        return watch
    watch.conversation = run_conversation(watched)
    attempt = next(a for a in attempts if a.run.pk == watched.pk)
    # The usage records (telemetry) when there are any; else what the agent's own output says so far.
    watch.tokens = attempt.tokens if attempt.tokens is not None else watch.conversation.tokens
    watch.cost_usd = attempt.cost_usd if attempt.cost_usd is not None else watch.conversation.cost_usd
    if attempt.tokens is None and watch.conversation.tokens:
        attempt.tokens, attempt.cost_usd = watch.tokens, watch.cost_usd
    for other in attempts[:TOTALS_READ_MAX]:
        if other.tokens is None and other is not attempt and not other.run.is_active:
            said = run_totals(other.run)
            if said is not None:
                other.tokens, other.cost_usd = said.tokens, said.cost_usd
    return watch


def task_had_runs(*, task: Task) -> bool:
    return Run.objects.filter(task=task).exists()
