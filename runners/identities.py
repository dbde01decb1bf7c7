"""Who is who in the runner protocol (SPEC §8): the runner behind a request, and the agent that
works a run (one per runner and provider, ``claude@build-1``)."""

import hashlib

from config.actors import Actor
from config.api.errors import DomainError
from runners.models import Runner
from sessions_app.keys import agent_get_or_create
from sessions_app.models import Agent, AgentApiKey

SLUG_MAX = 64  # Agent.slug


def runner_for_actor(*, actor: Actor) -> Runner:
    """The runner whose key (scope ``run``) made the request; 403 for anyone else, staff included:
    only a runner polls, heartbeats and ships logs for itself."""
    key = actor.api_key
    if actor.agent is None or key is None or not key.has_scope(AgentApiKey.Scope.RUN):
        raise DomainError(
            "This endpoint is for runners: authenticate with a runner key (scope 'run').", code="forbidden"
        )
    runner = Runner.objects.filter(agent_id=actor.agent.pk).first()
    if runner is None:
        raise DomainError(f"Agent {actor.agent.slug!r} is not a runner's agent.", code="forbidden")
    return runner


def run_agent_slug(*, provider: str, runner_name: str) -> str:
    """``<provider>-at-<runner>``: an Agent slug may not hold '@' (nor '.', which a provider may)."""
    slug = f"{provider.replace('.', '-')}-at-{runner_name}"
    if len(slug) > SLUG_MAX:
        # Long names: cut, and keep two different long names apart with a digest of the whole.
        digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
        slug = f"{slug[: SLUG_MAX - 9]}-{digest}"
    return slug


def run_agent_get_or_create(*, provider: str, runner: Runner) -> Agent:
    """The agent that works ``provider``'s runs on ``runner``, shown as ``<provider>@<runner>``."""
    known = {Agent.Provider.CLAUDE, Agent.Provider.CODEX, Agent.Provider.GEMINI}
    return agent_get_or_create(
        slug=run_agent_slug(provider=provider, runner_name=runner.name),
        display_name=f"{provider}@{runner.name}",
        provider=provider if provider in known else Agent.Provider.CUSTOM,
    )
