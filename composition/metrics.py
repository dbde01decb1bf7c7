"""Agent metrics over a period: tasks finished and failed, mean task time, tool calls and their
failure rate, and tool calls per time bucket for the agents page's chart. Here, at the top: they
read the board's tasks and the ledger's tool calls together.

Every figure comes from a grouped aggregate query, so the number of queries is the same for
two agents or two hundred.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Avg, Count, F, Q
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

from board.models import Task
from ledger.models import ToolInvocation

# Period key -> (length, bucket length, number of buckets).
PERIODS: dict[str, tuple[timedelta, str, int]] = {
    "24h": (timedelta(hours=24), "hour", 24),
    "7d": (timedelta(days=7), "day", 7),
    "30d": (timedelta(days=30), "day", 30),
}
DEFAULT_PERIOD = "24h"


@dataclass
class AgentMetrics:
    tasks_done: int = 0
    tasks_failed: int = 0
    mean_task_seconds: float | None = None
    tool_calls: int = 0
    tool_failures: int = 0
    # Tool calls per bucket, oldest first: (calls, failures).
    buckets: list[tuple[int, int]] = field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        finished = self.tasks_done + self.tasks_failed
        return self.tasks_done / finished if finished else None

    @property
    def tool_failure_rate(self) -> float | None:
        return self.tool_failures / self.tool_calls if self.tool_calls else None


@dataclass(frozen=True)
class Window:
    key: str
    since: datetime
    bucket_starts: list[datetime]
    bucket: str  # "hour" or "day"


def metrics_window(*, period: str, now: datetime | None = None) -> Window:
    if period not in PERIODS:
        period = DEFAULT_PERIOD
    length, bucket, count = PERIODS[period]
    now = timezone.localtime(now or timezone.now())
    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    current = now.replace(minute=0, second=0, microsecond=0)
    if bucket == "day":
        current = current.replace(hour=0)
    starts = [current - step * (count - 1 - i) for i in range(count)]
    return Window(key=period, since=now - length, bucket_starts=starts, bucket=bucket)


def agent_metrics(*, window: Window) -> dict[int, AgentMetrics]:
    """Metrics per agent id for agents with any activity in the window; three queries."""
    metrics: dict[int, AgentMetrics] = {}
    done, failed = Task.Status.DONE, Task.Status.FAILED
    tasks = (
        Task.objects.filter(assignee__isnull=False, status__in=[done, failed], finished_at__gte=window.since)
        .values("assignee_id")
        .annotate(
            done=Count("id", filter=Q(status=done)),
            failed=Count("id", filter=Q(status=failed)),
            mean=Avg(F("finished_at") - F("started_at"), filter=Q(status=done, started_at__isnull=False)),
        )
        .order_by()
    )
    for row in tasks:
        entry = metrics.setdefault(row["assignee_id"], AgentMetrics())
        entry.tasks_done, entry.tasks_failed = row["done"], row["failed"]
        entry.mean_task_seconds = row["mean"].total_seconds() if row["mean"] is not None else None

    trunc = TruncHour if window.bucket == "hour" else TruncDay
    failure = Q(status=ToolInvocation.Status.FAILURE)
    per_bucket = (
        ToolInvocation.objects.filter(started_at__gte=window.since)
        .annotate(bucket=trunc("started_at"))
        .values("agent_id", "bucket")
        .annotate(calls=Count("id"), failures=Count("id", filter=failure))
        .order_by()
    )
    index = {start: i for i, start in enumerate(window.bucket_starts)}
    for row in per_bucket:
        entry = metrics.setdefault(row["agent_id"], AgentMetrics())
        if not entry.buckets:
            entry.buckets = [(0, 0)] * len(window.bucket_starts)
        entry.tool_calls += row["calls"]
        entry.tool_failures += row["failures"]
        slot = index.get(timezone.localtime(row["bucket"]))
        if slot is not None:
            entry.buckets[slot] = (row["calls"], row["failures"])
    for entry in metrics.values():
        if not entry.buckets:
            entry.buckets = [(0, 0)] * len(window.bucket_starts)
    return metrics
