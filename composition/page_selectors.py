"""Reads for the engineering pages and the live session consumer: the session list with its
search, the session detail, the fragments a live push redraws, and what each agent holds."""

from dataclasses import dataclass, field

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Window
from django.db.models.functions import RowNumber

from board.models import Task
from composition.metrics import AgentMetrics, agent_metrics, metrics_window
from config.api.errors import DomainError
from ledger.models import ToolInvocation
from sessions_app.models import Agent, AgentApiKey, AgentSession, Checkpoint, Milestone, StreamEvent
from sessions_app.selectors import session_question
from workspaces.models import Artifact, Worktree

PAGE_SIZE = 25
DETAIL_EVENTS = 100  # the newest events a detail page opens with; the rest are in the events API
DETAIL_TOOL_CALLS = 200
DETAIL_CHECKPOINTS = 20
DETAIL_SUBAGENTS = 50
SUBAGENT_TOOL_CALLS = 50  # each subagent's first calls in the tree; its own page has them all
LIVE_EVENTS = 100  # a push of a 1,000-event batch redraws its newest events only
SEARCH_MAX_CHARS = 200
SEARCH_CONFIG = "english"


@dataclass(frozen=True)
class SessionFilters:
    status: str = ""
    agent: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, params) -> "SessionFilters":
        status = params.get("status", "")
        return cls(
            status=status if status in AgentSession.Status.values else "",
            agent=params.get("agent", "")[:64],
            q=params.get("q", "").strip()[:SEARCH_MAX_CHARS],
        )


def session_page_list(*, filters: SessionFilters, page: str | int = 1) -> Page:
    """One page of sessions, newest first, filtered; two queries (count, rows) whatever the size."""
    last_event = StreamEvent.objects.filter(session=OuterRef("pk")).order_by("-seq").values("created_at")[:1]
    queryset = (
        AgentSession.objects.select_related("agent")
        .annotate(last_event_at=Subquery(last_event))
        .order_by("-created_at", "id")
    )
    if filters.status:
        queryset = queryset.filter(status=filters.status)
    if filters.agent:
        queryset = queryset.filter(agent__slug=filters.agent)
    if filters.q:
        queryset = _search(queryset, filters.q)
    return Paginator(queryset, PAGE_SIZE).get_page(page)


def _search(queryset: QuerySet[AgentSession], text: str) -> QuerySet[AgentSession]:
    """Sessions whose intent or any milestone matches: full-text search on PostgreSQL (stemmed,
    web-search syntax: quotes, ``or``, ``-word``), a plain substring match elsewhere."""
    if connection.vendor == "postgresql":
        query = SearchQuery(text, search_type="websearch", config=SEARCH_CONFIG)
        milestones = Milestone.objects.annotate(document=SearchVector("text", config=SEARCH_CONFIG)).filter(
            session=OuterRef("pk"), document=query
        )
        return queryset.annotate(document=SearchVector("intent", config=SEARCH_CONFIG)).filter(
            Q(document=query) | Exists(milestones)
        )
    milestones = Milestone.objects.filter(session=OuterRef("pk"), text__icontains=text)
    return queryset.filter(Q(intent__icontains=text) | Exists(milestones))


def agent_choices() -> list[tuple[str, str]]:
    return [(a.slug, str(a)) for a in Agent.objects.only("slug", "display_name").order_by("slug")]


@dataclass
class SessionDetail:
    session: AgentSession
    events: list[StreamEvent]
    events_hidden: int  # older events not shown
    milestones: list[Milestone]
    tool_calls: list[ToolInvocation]
    tool_calls_hidden: int
    tool_call_failures: int
    checkpoints: list[Checkpoint]
    artifacts: list = field(default_factory=list)
    question: StreamEvent | None = None
    children: list["Subagent"] = field(default_factory=list)


@dataclass
class Subagent:
    """A child session in the session page's tree: a Claude Code subagent (the hook opens one per
    ``agent_id``) or a session an orchestrator started under this one."""

    session: AgentSession
    tool_calls: list[ToolInvocation]
    tool_call_count: int

    @property
    def kind(self) -> str:
        metadata = self.session.metadata if isinstance(self.session.metadata, dict) else {}
        return str(metadata.get("agent_type") or self.session.agent)

    @property
    def tool_calls_hidden(self) -> int:
        return self.tool_call_count - len(self.tool_calls)


def session_subagents(*, session: AgentSession) -> list[Subagent]:
    """The session's children, oldest first, each with its tool-call count and first calls: two
    queries however many children (none for the calls when there are no children)."""
    children = list(
        session.children.select_related("agent")
        .annotate(tool_call_count=Count("tool_calls"))
        .order_by("created_at", "id")[:DETAIL_SUBAGENTS]
    )
    if not children:
        return []
    calls: dict[str, list[ToolInvocation]] = {child.pk: [] for child in children}
    first_calls = (
        ToolInvocation.objects.filter(session_id__in=list(calls))
        .annotate(n=Window(RowNumber(), partition_by=F("session_id"), order_by=[F("started_at"), F("id")]))
        .filter(n__lte=SUBAGENT_TOOL_CALLS)
        .order_by("session_id", "started_at", "id")
    )
    for call in first_calls:
        calls[call.session_id].append(call)
    return [Subagent(session=c, tool_calls=calls[c.pk], tool_call_count=c.tool_call_count) for c in children]


def session_detail_get(*, session_id: str) -> SessionDetail:
    """Everything the detail page shows; a fixed number of queries, each capped in rows."""
    session = AgentSession.objects.select_related("agent", "workspace", "task", "parent").filter(pk=session_id).first()
    if session is None:
        raise DomainError(f"Session {session_id!r} not found.", code="not_found")
    events = list(StreamEvent.objects.filter(session=session).order_by("-seq")[:DETAIL_EVENTS])
    events.reverse()
    counts = _tool_call_counts(session.pk)
    tool_calls = list(ToolInvocation.objects.filter(session=session).order_by("-started_at", "-id")[:DETAIL_TOOL_CALLS])
    tool_calls.reverse()
    artifacts = []
    if session.workspace_id is not None:
        artifacts = list(Artifact.objects.filter(workspace_id=session.workspace_id).order_by("path", "id")[:500])
    return SessionDetail(
        session=session,
        events=events,
        events_hidden=max(0, session.last_event_seq - len(events)) if events else 0,
        milestones=list(Milestone.objects.filter(session=session).order_by("created_at", "id")),
        tool_calls=tool_calls,
        tool_calls_hidden=counts["total"] - len(tool_calls),
        tool_call_failures=counts["failed"],
        checkpoints=list(
            Checkpoint.objects.filter(session=session).defer("state").order_by("-seq")[:DETAIL_CHECKPOINTS]
        ),
        artifacts=artifacts,
        question=session_question(session=session) if session.status == AgentSession.Status.WAITING_FOR_INPUT else None,
        children=session_subagents(session=session),
    )


@dataclass
class LivePush:
    """What one push redraws on an open session page (the consumer renders it)."""

    session: AgentSession | None = None  # set when the header and reply box must be redrawn
    question: StreamEvent | None = None
    events: list[StreamEvent] = field(default_factory=list)
    events_skipped: int = 0
    milestones: list[Milestone] | None = None  # set when a milestone arrived
    tool_calls_created: list[ToolInvocation] = field(default_factory=list)
    tool_calls_finished: list[ToolInvocation] = field(default_factory=list)
    tool_call_counts: dict | None = None  # set with tool calls: the header's totals


def _tool_call_counts(session_id: str) -> dict:
    return ToolInvocation.objects.filter(session_id=session_id).aggregate(
        total=Count("id"), failed=Count("id", filter=Q(status=ToolInvocation.Status.FAILURE))
    )


def session_live_push(*, session_id: str, message: dict) -> LivePush:
    """Load what a session's live message names (sessions_app/live.py)."""
    push = LivePush()
    if message.get("seqs"):
        first, last = message["seqs"]
        first = max(first, last - LIVE_EVENTS + 1)
        push.events_skipped = first - message["seqs"][0]
        push.events = list(
            StreamEvent.objects.filter(session_id=session_id, seq__gte=first, seq__lte=last).order_by("seq")
        )
        if any(e.type == StreamEvent.Type.MILESTONE for e in push.events):
            push.milestones = list(Milestone.objects.filter(session_id=session_id).order_by("created_at", "id"))
    ids = list(message.get("tool_calls_created") or []) + list(message.get("tool_calls_finished") or [])
    if ids:
        calls = ToolInvocation.objects.filter(session_id=session_id, pk__in=ids).in_bulk()
        push.tool_calls_created = [calls[i] for i in message.get("tool_calls_created") or [] if i in calls]
        push.tool_calls_finished = [calls[i] for i in message.get("tool_calls_finished") or [] if i in calls]
        push.tool_call_counts = _tool_call_counts(session_id)
    if message.get("status"):
        push.session = AgentSession.objects.select_related("agent", "task", "parent").filter(pk=session_id).first()
        if push.session is not None and push.session.status == AgentSession.Status.WAITING_FOR_INPUT:
            push.question = session_question(session=push.session)
    return push


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    y: float
    height: float
    fail_y: float
    fail_height: float
    label: str


@dataclass
class AgentRow:
    agent: Agent
    tasks_in_progress: list = field(default_factory=list)
    worktrees: list = field(default_factory=list)
    open_sessions: int = 0
    metrics: object = None
    bars: list[Bar] = field(default_factory=list)

    @property
    def last_active(self):
        """The agent's latest sign of life: its heartbeat, which any request moves (liveness.py),
        or its keys' last use (older rows, written before requests counted as heartbeats)."""
        seen = [t for t in (self.agent.last_heartbeat_at, self.agent.key_last_used_at) if t is not None]
        return max(seen) if seen else None


def _agents_with_last_use() -> QuerySet[Agent]:
    """The agents by slug, each with the last use of any of its keys (in the same query)."""
    last_use = AgentApiKey.objects.filter(agent=OuterRef("pk"), last_used_at__isnull=False).order_by("-last_used_at")
    return Agent.objects.annotate(key_last_used_at=Subquery(last_use.values("last_used_at")[:1])).order_by("slug")


CHART_WIDTH, CHART_HEIGHT = 168, 36


def agent_overview(*, period: str):
    """Each agent with what it holds and its metrics over ``period``; six queries for any number
    of agents. Returns the metrics window and the rows."""
    window = metrics_window(period=period)
    rows = {agent.pk: AgentRow(agent=agent) for agent in _agents_with_last_use()}
    for task in Task.objects.filter(status=Task.Status.IN_PROGRESS, assignee__isnull=False).only(
        "id", "title", "assignee_id"
    ):
        if task.assignee_id in rows:
            rows[task.assignee_id].tasks_in_progress.append(task)
    for worktree in (
        Worktree.objects.filter(holder__isnull=False, status=Worktree.Status.ACTIVE)
        .select_related("repository")
        .order_by("repository__name", "type", "name")
    ):
        if worktree.holder_id in rows:
            rows[worktree.holder_id].worktrees.append(worktree)
    open_sessions = (
        AgentSession.objects.filter(ended_at__isnull=True).values("agent_id").annotate(n=Count("id")).order_by()
    )
    for entry in open_sessions:
        if entry["agent_id"] in rows:
            rows[entry["agent_id"]].open_sessions = entry["n"]
    metrics = agent_metrics(window=window)
    empty = [(0, 0)] * len(window.bucket_starts)
    for agent_id, row in rows.items():
        row.metrics = metrics.get(agent_id) or AgentMetrics(buckets=empty)
        row.bars = spark_bars(buckets=row.metrics.buckets, starts=window.bucket_starts, hourly=window.bucket == "hour")
    return window, list(rows.values())


def spark_bars(*, buckets: list[tuple[int, int]], starts: list, hourly: bool) -> list[Bar]:
    """Bar geometry for the inline SVG chart: tool calls per bucket, failures drawn over them."""
    if not buckets:
        return []
    peak = max(calls for calls, _ in buckets) or 1
    slot = CHART_WIDTH / len(buckets)
    width = max(1.0, slot - 1)
    bars = []
    for i, ((calls, failures), start) in enumerate(zip(buckets, starts, strict=True)):
        height = round(calls / peak * (CHART_HEIGHT - 2), 2) if calls else 0
        fail_height = round(failures / peak * (CHART_HEIGHT - 2), 2) if failures else 0
        when = start.strftime("%H:00") if hourly else start.strftime("%b %d")
        bars.append(
            Bar(
                x=round(i * slot, 2),
                width=round(width, 2),
                y=round(CHART_HEIGHT - height, 2),
                height=height,
                fail_y=round(CHART_HEIGHT - fail_height, 2),
                fail_height=fail_height,
                label=f"{when}: {calls} tool call{'s' if calls != 1 else ''}, {failures} failed",
            )
        )
    return bars
