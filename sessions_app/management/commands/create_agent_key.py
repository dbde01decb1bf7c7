from django.core.management.base import BaseCommand, CommandError

from config.api.errors import DomainError
from sessions_app.keys import agent_get_or_create, api_key_create
from sessions_app.models import Agent, AgentApiKey


class Command(BaseCommand):
    help = (
        "Create an API key for an agent (creating the agent if it does not exist). "
        "The key is printed alone on the last line; it is shown only this once."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="The agent's slug, e.g. claude-1.")
        parser.add_argument("--name", default="", help="A label for the key, e.g. the machine it runs on.")
        parser.add_argument(
            "--scope",
            action="append",
            choices=AgentApiKey.Scope.values,
            help="Scope to grant; repeat for several. Default: agent. 'orchestrate' may also create tasks.",
        )
        parser.add_argument("--provider", choices=Agent.Provider.values, default=Agent.Provider.CUSTOM)

    def handle(self, *args, slug, name, scope, provider, **options):
        if not slug or len(slug) > 64 or not all(c.isalnum() or c in "-_" for c in slug):
            raise CommandError("slug must be 1-64 letters, digits, '-' or '_'.")
        agent = agent_get_or_create(slug=slug, provider=provider)
        try:
            issued = api_key_create(agent=agent, name=name, scopes=scope or [AgentApiKey.Scope.AGENT])
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(
            f"Created key {issued.api_key.prefix}… for agent {agent.slug!r} (scopes: {', '.join(issued.api_key.scopes)}). "
            "Store it now: it is not shown again."
        )
        self.stdout.write(issued.key)
