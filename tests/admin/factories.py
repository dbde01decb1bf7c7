"""Factories for the models tests/factories.py does not cover yet, and one-row builders for the admin tests."""

import itertools
from datetime import timedelta

import factory
from django.urls import reverse
from django.utils import timezone

from board.models import Campaign, Lead, SyncedFile, SyncIssue, Task, TaskClaim
from board.services import task_claim
from config.actors import SYSTEM, Actor
from ledger.models import Event, ToolInvocation, WebhookDelivery, WebhookSubscription
from ledger.webhooks import webhook_subscribe
from runners.models import PullRequest, RepositoryShipping, ReviewComment, Run, Runner, TaskReview
from runners.services import run_queue, run_transition, runner_key_create
from runners.ship_secrets import token_encrypt
from sessions_app.keys import api_key_create, api_key_revoke
from sessions_app.models import Agent, AgentApiKey, AgentSession, Checkpoint, Milestone, StreamEvent, ToolPolicy
from tests.factories import (
    AgentFactory,
    CampaignFactory,
    SessionFactory,
    StreamEventFactory,
    TaskFactory,
    ToolCallFactory,
    UserFactory,
)
from usage.models import Budget, UsageRecord
from workspaces.models import Artifact, ArtifactVersion, Repository, Workspace, Worktree, WorktreeClaimRequest


def admin_url(model, view: str, *args) -> str:
    """``admin_url(Task, "change", task.pk)``: an admin page of ``model``."""
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


class CheckpointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Checkpoint

    session = factory.SubFactory(SessionFactory)
    seq = factory.Sequence(lambda n: n + 1)
    state = factory.LazyFunction(lambda: {"step": 3, "todo": ["write tests"]})
    size_bytes = 40


class MilestoneFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Milestone

    session = factory.SubFactory(SessionFactory)
    text = factory.Sequence(lambda n: f"Milestone {n}: tests pass")


class EventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Event

    name = "task.created"
    subject_type = "task"
    subject_id = factory.Sequence(str)
    actor = "system"
    payload = factory.LazyFunction(lambda: {"title": "Write the admin"})


class LeadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Lead

    campaign = factory.SubFactory(CampaignFactory)
    name = factory.Sequence(lambda n: f"Lead {n}")
    company = "Acme"
    email = factory.LazyAttribute(lambda o: f"{o.name.replace(' ', '').lower()}@example.com")


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    kind = Workspace.Kind.SESSION
    root_path = factory.Sequence(lambda n: f"/srv/switchyard/workspaces/session_{n:05d}")


class ArtifactFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Artifact

    workspace = factory.SubFactory(WorkspaceFactory)
    path = factory.Sequence(lambda n: f"notes/note-{n}.md")
    kind = Artifact.Kind.NOTE
    size = 12
    sha256 = "a" * 64


class ArtifactVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ArtifactVersion

    artifact = factory.SubFactory(ArtifactFactory)
    number = factory.Sequence(lambda n: n + 1)
    size = 12
    sha256 = "b" * 64


class RepositoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repository

    name = factory.Sequence(lambda n: f"repo-{n}")
    path = factory.LazyAttribute(lambda o: f"/srv/git/{o.name}")


class WorktreeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Worktree

    repository = factory.SubFactory(RepositoryFactory)
    type = "feat"
    name = factory.Sequence(lambda n: f"thing-{n}")
    branch = factory.LazyAttribute(lambda o: f"{o.type}-{o.name}")
    real_path = factory.LazyAttribute(lambda o: f"{o.repository.path}-worktrees/{o.type}-{o.name}")

    class Params:
        held = factory.Trait(
            holder=factory.SubFactory(AgentFactory),
            claimed_at=factory.LazyFunction(timezone.now),
            lease_expires_at=factory.LazyFunction(lambda: timezone.now() + timedelta(hours=1)),
        )


class WorktreeClaimRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WorktreeClaimRequest

    worktree = factory.SubFactory(WorktreeFactory)
    agent = factory.SubFactory(AgentFactory)


# --- One row of each model, with the related rows its admin pages show ----------------------


def claimed_task() -> Task:
    """An in-progress task claimed through the service, in a campaign, by a session's agent."""
    agent = AgentFactory()
    session = SessionFactory(agent=agent)
    task = TaskFactory(campaign=CampaignFactory())
    task, _ = task_claim(actor=Actor(agent=agent), agent=agent, task=task, session=session)
    return task


def _agent() -> Agent:
    agent = AgentFactory()
    api_key_create(agent=agent)
    api_key_revoke(api_key=api_key_create(agent=agent).api_key)
    return agent


def _session() -> AgentSession:
    session = SessionFactory(agent=AgentFactory(), task=TaskFactory(), parent=SessionFactory())
    MilestoneFactory(session=session)
    return session


def _campaign() -> Campaign:
    campaign = CampaignFactory()
    LeadFactory(campaign=campaign)
    TaskFactory(campaign=campaign)
    return campaign


def _artifact() -> Artifact:
    artifact = ArtifactFactory(tool_invocation=ToolCallFactory())
    ArtifactVersionFactory(artifact=artifact)
    return artifact


def _worktree() -> Worktree:
    worktree = WorktreeFactory(held=True)
    WorktreeClaimRequestFactory(worktree=worktree)
    return worktree


_numbers = itertools.count()


def _runner() -> Runner:
    return runner_key_create(name=f"runner-{next(_numbers)}", labels=["linux"], capacity=2)[0]


def _run() -> Run:
    """A run of a fresh task, held by a fresh runner that is starting it."""
    run = run_queue(actor=Actor(user=UserFactory(is_staff=True)), task=TaskFactory(), provider="claude")
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.ASSIGNED, runner=_runner())
    return run_transition(actor=SYSTEM, run=run, to=Run.Status.STARTING)


ROW_BUILDERS = {
    Agent: _agent,
    AgentApiKey: lambda: api_key_create(agent=AgentFactory(), name="ci").api_key,
    AgentSession: _session,
    StreamEvent: StreamEventFactory,
    Checkpoint: CheckpointFactory,
    Milestone: MilestoneFactory,
    ToolPolicy: lambda: ToolPolicy.objects.create(agent=AgentFactory(), pattern="Bash(rm *)", note="ci"),
    ToolInvocation: ToolCallFactory,
    Event: EventFactory,
    Task: claimed_task,
    TaskClaim: lambda: claimed_task().claims.get(),
    Campaign: _campaign,
    Lead: LeadFactory,
    Workspace: lambda: SessionFactory(workspace=WorkspaceFactory()).workspace,
    Artifact: _artifact,
    Repository: lambda: WorktreeFactory().repository,
    Worktree: _worktree,
    WorktreeClaimRequest: WorktreeClaimRequestFactory,
    SyncIssue: lambda: SyncIssue.objects.create(
        path=f"session-{next(_numbers)}/backend.json",
        session_key="session-1",
        error="not valid JSON",
        first_seen_at=timezone.now(),
        last_seen_at=timezone.now(),
    ),
    SyncedFile: lambda: SyncedFile.objects.create(
        path=f"session-{next(_numbers)}/backend.json",
        session_key="session-1",
        size=2,
        mtime_ns=1,
        sha256="c" * 64,
        last_synced_at=timezone.now(),
    ),
    WebhookSubscription: lambda: webhook_subscribe(url="https://hooks.example.com/in"),
    Runner: _runner,
    Run: _run,
    TaskReview: lambda: TaskReview.objects.create(task=TaskFactory(), decision="approve", reviewer="user:admin"),
    ReviewComment: lambda: ReviewComment.objects.create(
        task=TaskFactory(), path="src/app.py", line=3, body="<b>why?</b>", author="user:admin"
    ),
    PullRequest: lambda: PullRequest.objects.create(
        task=TaskFactory(),
        remote="origin",
        branch="task-1",
        state="open",
        number=7,
        url="https://github.com/o/r/pull/7",
    ),
    RepositoryShipping: lambda: RepositoryShipping.objects.create(
        repository=WorktreeFactory().repository, github_repo="o/r", github_token_encrypted=token_encrypt("ghp_x")
    ),
    UsageRecord: lambda: UsageRecord.objects.create(
        agent=AgentFactory(),
        model="claude-sonnet-4-5",
        operation="api_request",
        input_tokens=1200,
        output_tokens=300,
        cost_usd="0.0081",
        occurred_at=timezone.now(),
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key=f"{next(_numbers):064x}",
    ),
    Budget: lambda: Budget.objects.create(scope=Budget.Scope.TASK, task=TaskFactory(), limit_usd="5.0000"),
    WebhookDelivery: lambda: WebhookDelivery.objects.create(
        subscription=webhook_subscribe(url="https://hooks.example.com/in"),
        event=EventFactory(),
        next_attempt_at=timezone.now(),
    ),
}
