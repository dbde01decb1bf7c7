"""The task's change, its comments and review decisions (SPEC §10), in and out."""

from rest_framework import serializers

from config.api.fields import StrictSerializer
from runners.api.serializers import PROVIDER_PATTERN, RunOutput
from runners.models import ReviewComment, TaskReview
from runners.review import COMMENTS_MAX

INT32_MAX = 2**31 - 1
PATH_MAX = 4096
MESSAGE_MAX = 20_000


class DiffLineOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["added", "removed", "context"])
    old = serializers.IntegerField(allow_null=True, help_text="Its number in the base; null for an added line.")
    new = serializers.IntegerField(allow_null=True, help_text="Its number on the branch; null for a removed line.")
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, help_text="The agent's: escape it.")


class DiffHunkOutput(serializers.Serializer):
    header = serializers.CharField(allow_blank=True, trim_whitespace=False)
    old_start = serializers.IntegerField()
    old_lines = serializers.IntegerField()
    new_start = serializers.IntegerField()
    new_lines = serializers.IntegerField()
    lines = DiffLineOutput(many=True)


class DiffFileOutput(serializers.Serializer):
    path = serializers.CharField(trim_whitespace=False)
    old_path = serializers.CharField(allow_null=True, trim_whitespace=False, help_text="A renamed file's old path.")
    status = serializers.ChoiceField(choices=["added", "modified", "deleted", "renamed", "binary"])
    additions = serializers.IntegerField()
    deletions = serializers.IntegerField()
    binary = serializers.BooleanField()
    too_large = serializers.CharField(
        allow_blank=True, help_text="Why it is summarised and has no hunks (binary, too large); empty when shown."
    )
    old_size = serializers.IntegerField(help_text="Bytes in the base (0: none).")
    new_size = serializers.IntegerField(help_text="Bytes on the branch (0: none).")
    hunks = DiffHunkOutput(many=True)


class DiffBaseOutput(serializers.Serializer):
    branch = serializers.CharField(help_text="The repository's default branch.")
    commit = serializers.CharField()
    how = serializers.CharField(help_text="merge-base: where the task branch left the default branch.")


class DiffTotalsOutput(serializers.Serializer):
    files = serializers.IntegerField()
    additions = serializers.IntegerField()
    deletions = serializers.IntegerField()
    summarised = serializers.IntegerField(help_text="Files shown as a summary only.")


class DiffReviewOutput(serializers.Serializer):
    decision = serializers.ChoiceField(choices=TaskReview.Decision.choices)
    reviewer = serializers.CharField()
    head_commit = serializers.CharField(allow_blank=True)
    current = serializers.BooleanField(help_text="Made on the branch's head as it is now.")
    created_at = serializers.DateTimeField()


class TaskDiffOutput(serializers.Serializer):
    task = serializers.IntegerField()
    repository = serializers.CharField()
    branch = serializers.CharField()
    head = serializers.CharField(help_text="The branch's head commit.")
    base = DiffBaseOutput()
    totals = DiffTotalsOutput()
    review = DiffReviewOutput(allow_null=True, help_text="The newest review decision; null: none yet.")
    files = DiffFileOutput(many=True)


class CommentInput(StrictSerializer):
    path = serializers.CharField(max_length=PATH_MAX, trim_whitespace=False, help_text="A file of the change.")
    line = serializers.IntegerField(
        min_value=1,
        max_value=INT32_MAX,
        required=False,
        allow_null=True,
        help_text="A line the diff shows (its number on the branch; a removed line's in the base). "
        "Left out: the whole file.",
    )
    body = serializers.CharField(max_length=ReviewComment.BODY_MAX)


class CommentOutput(serializers.ModelSerializer):
    task = serializers.PrimaryKeyRelatedField(read_only=True)
    run = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    review = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = ReviewComment
        fields = ["id", "task", "path", "line", "body", "author", "run", "review", "created_at"]


class ReviewInput(StrictSerializer):
    decision = serializers.ChoiceField(choices=TaskReview.Decision.choices)
    message = serializers.CharField(
        max_length=MESSAGE_MAX,
        required=False,
        allow_blank=True,
        help_text="request_changes: what to change; ask_review: what the reviewer should look at.",
    )
    comments = CommentInput(
        many=True, required=False, max_length=COMMENTS_MAX, help_text="request_changes: line comments sent with it."
    )
    provider = serializers.RegexField(
        PROVIDER_PATTERN,
        required=False,
        max_length=64,
        help_text="request_changes: a fresh session of this provider instead of the same session continuing; "
        "ask_review: the provider of the review run (else the provider of the task's latest run).",
    )

    def validate(self, attrs):
        if attrs["decision"] == TaskReview.Decision.ASK_REVIEW:
            if attrs.get("comments"):
                raise serializers.ValidationError(
                    {"comments": ["ask_review takes no comments: the review run writes them."]}
                )
            return attrs
        if attrs["decision"] == TaskReview.Decision.APPROVE and (
            attrs.get("message") or attrs.get("comments") or attrs.get("provider")
        ):
            raise serializers.ValidationError(
                {"decision": ["approve takes no message, comments or provider: those go with request_changes."]}
            )
        if attrs["decision"] == TaskReview.Decision.REQUEST_CHANGES and not (
            (attrs.get("message") or "").strip() or attrs.get("comments")
        ):
            raise serializers.ValidationError({"message": ["request_changes needs a message or comments."]})
        return attrs


class ReviewOutput(serializers.ModelSerializer):
    task = serializers.PrimaryKeyRelatedField(read_only=True)
    run = RunOutput(allow_null=True, help_text="request_changes and ask_review: the run queued.")
    comments = CommentOutput(many=True)

    class Meta:
        model = TaskReview
        fields = ["id", "task", "decision", "reviewer", "message", "head_commit", "run", "comments", "created_at"]
