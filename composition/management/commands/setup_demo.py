import json
import os
import shutil
import subprocess
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from board.models import Task
from board.services import campaign_create, task_create
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import PRODUCT_OWNERS
from runners.local_runner import local_runner_config_write
from sessions_app.keys import agent_get_or_create, api_key_create
from sessions_app.models import AgentApiKey
from sessions_app.supervision import ServeAlreadyRunning, ServeLock
from workspaces.worktrees.services import repository_register

# (title, priority, labels, description, in the demo repository). The descriptions read well as a
# first run of the local runner's demo provider: press Run on a card and it reads the task, writes
# notes, commits them in a worktree of the demo repository and lands in Review. A line "ask: ..."
# makes it ask the product owner first (answer it on the session page).
DEMO_TASKS = [
    (
        "Triage the failing nightly build",
        "P0",
        ["ci"],
        "The nightly build has failed three nights running, always in the integration stage.\n"
        "Find the first failing test and say whether it is the code or the build machine.",
        False,
    ),
    (
        "Write the onboarding guide for new agents",
        "P1",
        ["docs"],
        "A one-page guide for a new agent: how to open a session, report tool calls and milestones, "
        "and hand work back for review.\n\n"
        "Try it: press Run on this card and choose the demo provider. The local runner starts the demo "
        "agent, which writes its notes into a worktree of the demo repository, commits them, and moves "
        "the card to Review with the diff.",
        True,
    ),
    (
        "Add retries to the webhook sender",
        "P2",
        ["backend"],
        "Deliveries that time out are dropped today. Retry them with backoff before giving up.\n"
        "ask: How many attempts before a delivery is given up: 3 or 5?",
        True,
    ),
    ("Tidy the kanban colours", "P3", ["frontend"], "The In progress and Review columns look alike.", False),
]
DEMO_REPOSITORY = "demo-shop"
DEMO_REPOSITORY_README = """# Demo shop

A small repository that `make run` made for the demo: runs of the demo provider work in worktrees
of it, and commit their notes there.
"""


DEMO_PRIORITIES = """# Q4 priorities

**Priority Level:** Medium

## P0 Critical
- [ ] Fix the login redirect loop @demo-agent #auth
  Users on Safari bounce between /login and /home.
- [x] Rotate the leaked staging key

## High
1. [ ] Speed up the board for large campaigns #performance

## Nice to have
* [ ] Dark mode for the board #frontend
"""

DEMO_CAMPAIGN = {
    "type": "marketing-campaign",
    "name": "Spring developer webinar",
    "priority": "medium",
    "deliverables": ["landing-page", "email-invite", "follow-up-survey"],
    "target_audience": "platform engineers",
    "leads": [{"name": "Ada Byron", "company": "Analytical Engines", "email": "ada@example.com", "score": 80}],
}


def _demo_repository(folder: Path):
    """A git repository for the demo cards to run in (``folder``/demo-shop: var/demo-repos/demo-shop
    for `make run`), made and registered once; None where git is missing (the runs then work in their
    session workspaces)."""
    if shutil.which("git") is None:
        return None
    path = folder / DEMO_REPOSITORY
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        (path / "README.md").write_text(DEMO_REPOSITORY_README, encoding="utf-8")
        # Its own identity: a machine without a git user must still be able to make it.
        env = {**os.environ, "GIT_AUTHOR_NAME": "Switchyard demo", "GIT_AUTHOR_EMAIL": "demo@switchyard.invalid"}
        env.update(GIT_COMMITTER_NAME="Switchyard demo", GIT_COMMITTER_EMAIL="demo@switchyard.invalid")
        for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-q", "-m", "Demo shop"]):
            subprocess.run(["git", "-C", str(path), *args], env=env, check=True, capture_output=True, timeout=60)
    try:
        return repository_register(path=str(path), name=DEMO_REPOSITORY)[0]
    except DomainError:
        return None


def _write_demo_inputs() -> list[str]:
    """A sample priority file and campaign definition, so the import pages have something to show."""
    written = []
    samples = [
        (settings.REPORTS_DIR / "demo-priorities.md", DEMO_PRIORITIES),
        (settings.TASK_DEFS_DIR / "demo-webinar.json", json.dumps(DEMO_CAMPAIGN, indent=2) + "\n"),
    ]
    for path, text in samples:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(text, encoding="utf-8")
            written.append(str(path))
    return written


class Command(BaseCommand):
    help = (
        "Prepare the embedded demo: an admin user (admin / admin) and a product owner (owner / owner), "
        "local use only; a demo agent with a fresh API key; a few tasks and a campaign the first time; "
        "a sample priority file and campaign definition to import. Safe to run again; with --welcome-file or "
        "--runner-config (preparing a serve) it refuses, writing nothing, while a serve runs over this var/."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", default=None, help="Port to print in the URLs (default: $PORT or 8000).")
        parser.add_argument(
            "--welcome-file",
            default=None,
            help="Write the URLs and the demo key to this file (readable by you only) instead of printing them: "
            "`make run` has `serve --welcome-file` print them last, below the start-up logs.",
        )
        parser.add_argument(
            "--runner-config",
            default=None,
            help="Make sure the local runner 'local' exists and this file (private) holds its config and a "
            "valid key, for `serve --runner-config` to start it; an existing valid key is kept.",
        )

    def handle(self, *args, port, welcome_file, runner_config, **options):
        if welcome_file or runner_config:
            # Preparing a serve (`make run`): while one runs over this var/, refuse before anything is
            # written. Its local runner reads the runner config, and a new URL there (this run's port)
            # would send it to a dead port once this run's serve refused too.
            try:
                ServeLock(settings.VAR_DIR).check()
            except ServeAlreadyRunning as exc:
                raise CommandError(str(exc)) from None
        self._prepare(port, welcome_file, runner_config)

    @transaction.atomic
    def _prepare(self, port, welcome_file, runner_config):
        port = port or os.environ.get("PORT", "8000")
        User = get_user_model()
        if not User.objects.filter(username="admin").exists():
            User.objects.create_superuser("admin", "admin@example.com", "admin")
            self.stdout.write("Created the demo admin user: admin / admin (change it before sharing this machine).")
        if not User.objects.filter(username="owner").exists():
            owner = User.objects.create_user("owner", "owner@example.com", "owner")
            # get_or_create: an operator (or a test that flushed the tables) may have removed the group.
            owner.groups.add(Group.objects.get_or_create(name=PRODUCT_OWNERS)[0])
            self.stdout.write("Created the demo product owner: owner / owner.")
        for path in _write_demo_inputs():
            self.stdout.write(f"Wrote a sample import file: {path}")
        agent = agent_get_or_create(slug="demo-agent", display_name="Demo agent", provider="claude")
        issued = api_key_create(
            agent=agent, name="make run", scopes=[AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE]
        )
        admin = User.objects.get(username="admin")
        if not Task.objects.exists():
            actor = Actor(user=admin)
            # Beside the local runner's config: the demo repository is for that runner's runs.
            repository = _demo_repository(Path(runner_config).parent / "demo-repos") if runner_config else None
            for title, priority, labels, description, in_repository in DEMO_TASKS:
                task_create(
                    actor=actor,
                    title=title,
                    priority=priority,
                    labels=labels,
                    description=description,
                    repository=repository if in_repository else None,
                )
            campaign_create(
                actor=actor,
                type="marketing-campaign",
                name="Healthcare launch",
                priority="high",
                deliverables=["blog-post", "social-media", "email"],
                target_audience="enterprise-healthcare",
            )
            self.stdout.write(f"Created {Task.objects.count()} demo tasks and a campaign.")
        base = f"http://127.0.0.1:{port}"
        if runner_config:
            # The runner's root (its logs and state) beside its config: var/runner for `make run`.
            local = local_runner_config_write(
                path=Path(runner_config), url=base, root=Path(runner_config).parent / "runner"
            )
            if local.minted:
                self.stdout.write(
                    f"Made a key for the local runner {local.runner.name!r}; it is kept in {runner_config}."
                )
        welcome = (
            "\nSwitchyard is running:\n"
            f"  board      {base}/   (owner / owner, or admin / admin)\n"
            f"  admin      {base}/admin/   (admin / admin)\n"
            f"  API docs   {base}/api/docs/\n"
            f"  health     {base}/healthz\n"
            f"  try it     curl -H 'Authorization: Bearer {issued.key}' {base}/api/v1/agents/me/\n"
            "Demo agent key (shown once):\n"
            f"{issued.key}\n"
        )
        if welcome_file:
            # Created readable by this user only: it holds a live key until serve prints and deletes it.
            fd = os.open(welcome_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(welcome)
            self.stdout.write("The URLs and the demo agent key follow once everything has started.")
        else:
            self.stdout.write(welcome.rstrip("\n"))
