"""What shipping a task's change keeps (SPEC §10 "Ship"): each repository's push and GitHub
settings, and each task's pull request as Switchyard last saw it. Imported by runners/models.py."""

from django.db import models
from django.db.models import Q

from config.models import TimeStampedModel


class RepositoryShipping(TimeStampedModel):
    """Where a repository's task branches go. The GitHub token is stored encrypted (runners/ship_secrets.py)
    and never shown: pages, the admin and the API say only whether one is set."""

    repository = models.OneToOneField("workspaces.Repository", on_delete=models.CASCADE, related_name="shipping")
    push_remote = models.CharField(
        max_length=100, blank=True, help_text="The git remote task branches are pushed to; empty: origin."
    )
    github_repo = models.CharField(
        max_length=200,
        blank=True,
        help_text="owner/name on GitHub; empty: read from the remote's URL when it is a github.com one.",
    )
    github_token_encrypted = models.TextField(blank=True, editable=False)

    class Meta:
        verbose_name_plural = "repository shipping settings"

    def __str__(self) -> str:
        return f"shipping of {self.repository_id}"


class PullRequest(TimeStampedModel):
    """A task's pushed branch and the pull request opened for it; ``error`` is the last attempt's
    failure, shown on the card until an attempt succeeds."""

    class State(models.TextChoices):
        PUSHED = "pushed", "Pushed"  # the branch is on the remote; no pull request (no GitHub token or remote)
        OPEN = "open", "Open"  # GitHub says open
        MERGED = "merged", "Merged"  # GitHub says merged
        CLOSED = "closed", "Closed"  # closed without a merge

    task = models.OneToOneField("board.Task", on_delete=models.CASCADE, related_name="pull_request")
    remote = models.CharField(max_length=100)
    branch = models.CharField(max_length=255)
    pushed_commit = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, blank=True)
    number = models.PositiveIntegerField(null=True, blank=True)
    url = models.CharField(max_length=500, blank=True, help_text="The pull request on GitHub (https).")
    github_repo = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True, help_text="Why the last push or GitHub call failed; empty: it worked.")
    checked_at = models.DateTimeField(null=True, blank=True, help_text="When GitHub was last asked its state.")

    class Meta:
        indexes = [
            models.Index(fields=["checked_at"], condition=Q(state="open"), name="pull_request_open_checked"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["", "pushed", "open", "merged", "closed"]), name="pull_request_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"pull request of task {self.task_id}"
