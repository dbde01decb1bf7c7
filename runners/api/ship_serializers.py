"""Shipping a task's change (SPEC §10 "Ship"): merge and pull request, in and out."""

from rest_framework import serializers

from config.api.fields import StrictSerializer
from runners.ship_merge import STRATEGIES


class MergeInput(StrictSerializer):
    strategy = serializers.ChoiceField(
        choices=list(STRATEGIES),
        required=False,
        default="merge",
        help_text="merge: a merge commit with both heads as parents; squash: one commit on the default branch.",
    )
    force = serializers.BooleanField(
        required=False, default=False, help_text="Merge a change that is not approved (staff only)."
    )


class MergeOutput(serializers.Serializer):
    message = serializers.CharField(help_text="What happened, in a sentence.")
    task = serializers.IntegerField()
    status = serializers.CharField(help_text="The task's column after the merge: done.")
    strategy = serializers.ChoiceField(choices=list(STRATEGIES))
    branch = serializers.CharField(help_text="The task branch that was merged.")
    default_branch = serializers.CharField(help_text="The branch merged into.")
    commit = serializers.CharField(help_text="The default branch's new head.")
    previous = serializers.CharField(help_text="The default branch's head before the merge.")
    head = serializers.CharField(help_text="The task branch's head that was merged.")
    forced = serializers.BooleanField(help_text="Merged without a current approval.")


class MergeConflictOutput(serializers.Serializer):
    message = serializers.CharField()
    files = serializers.ListField(child=serializers.CharField(), required=False, help_text="The conflicting paths.")
    resolve = serializers.CharField(
        required=False, help_text="merge_conflict: POST .../merge/resolve/ asks the agent to resolve it."
    )


class PullRequestOutput(serializers.Serializer):
    remote = serializers.CharField()
    branch = serializers.CharField()
    pushed_commit = serializers.CharField(allow_blank=True)
    state = serializers.ChoiceField(
        choices=["", "pushed", "open", "merged", "closed"],
        help_text="pushed: on the remote, no pull request; open, merged, closed: as GitHub last said.",
    )
    number = serializers.IntegerField(allow_null=True)
    url = serializers.CharField(allow_blank=True)
    github_repo = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_blank=True, help_text="Why the last attempt failed; empty: it worked.")
    checked_at = serializers.DateTimeField(allow_null=True)


class PullRequestResultOutput(serializers.Serializer):
    message = serializers.CharField(help_text="What happened, in a sentence.")
    pull_request = PullRequestOutput()
