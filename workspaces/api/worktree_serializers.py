from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import StrictSerializer, datetime_output
from workspaces.models import Repository, Worktree
from workspaces.worktrees.services import KNOWN_TYPES, NAME_MAX_LENGTH, TYPE_MAX_LENGTH


class RepositoryOutput(serializers.ModelSerializer):
    active_worktrees = serializers.IntegerField(read_only=True)
    runner = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        allow_null=True,
        help_text="The runner whose machine holds the clone (its path is there); null: the server's.",
    )

    class Meta:
        model = Repository
        fields = ["id", "name", "path", "default_branch", "sync_dir", "runner", "active_worktrees", "created_at"]


class WorktreeCreateInput(StrictSerializer):
    type = serializers.CharField(
        max_length=TYPE_MAX_LENGTH, help_text=f"A slug: {', '.join(KNOWN_TYPES)} or any other."
    )
    name = serializers.CharField(
        max_length=NAME_MAX_LENGTH,
        required=False,
        help_text="A slug; branch and folder are `<type>-<name>`. Defaults to the PR number when one is given.",
    )
    ref = serializers.CharField(
        max_length=255, required=False, help_text="Commit the new branch starts from (branch, tag, sha)."
    )
    pr_number = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, help_text="Fetch refs/pull/<n>/head from origin."
    )

    # What validate() and workspaces.worktrees.services.worktree_create enforce across fields
    # (config/api/schema_constraints.py merges it into the schema).
    openapi_rules = {
        "allOf": [
            {"anyOf": [{"required": ["name"]}, {"required": ["pr_number"]}]},
            {"not": {"required": ["ref", "pr_number"]}},
            {
                "anyOf": [
                    {"properties": {"type": {"not": {"enum": ["review"]}}}},
                    {"required": ["ref"]},
                    {"required": ["pr_number"]},
                ]
            },
        ]
    }

    def validate(self, attrs):
        if "name" not in attrs:
            if "pr_number" not in attrs:
                raise serializers.ValidationError({"name": ["This field is required."]})
            attrs["name"] = str(attrs["pr_number"])
        return attrs


class WorktreeClaimInput(StrictSerializer):
    wait = serializers.BooleanField(
        required=False, default=False, help_text="Queue (202) instead of a 409 when another agent holds it."
    )


class WorktreeConfigSyncInput(StrictSerializer):
    repair = serializers.BooleanField(
        required=False, default=False, help_text="Make missing links and fix wrong ones; files in the way stay."
    )


class WorktreeOutput(serializers.ModelSerializer):
    repository_name = serializers.CharField(source="repository.name", read_only=True)
    path = serializers.CharField(source="real_path", read_only=True)
    holder = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = Worktree
        fields = [
            "id",
            "repository",
            "repository_name",
            "type",
            "name",
            "branch",
            "path",
            "pr_number",
            "status",
            "holder",
            "claimed_at",
            "released_at",
            "lease_expires_at",
            "workspace",
            "created_at",
        ]


def worktree_render(worktree: Worktree) -> dict:
    """What ``WorktreeOutput(worktree).data`` gives, built by hand for the claim and release
    endpoints, where the serializer's field machinery was about a tenth of a call. Needs the
    repository's name and the holder's slug loaded. tests/workspaces/test_worktree_render.py
    holds the two to the same output."""
    return {
        "id": worktree.pk,
        "repository": worktree.repository_id,
        "repository_name": worktree.repository.name,
        "type": worktree.type,
        "name": worktree.name,
        "branch": worktree.branch,
        "path": worktree.real_path,
        "pr_number": worktree.pr_number,
        "status": worktree.status,
        "holder": worktree.holder.slug if worktree.holder_id is not None and worktree.holder is not None else None,
        "claimed_at": datetime_output(worktree.claimed_at),
        "released_at": datetime_output(worktree.released_at),
        "lease_expires_at": datetime_output(worktree.lease_expires_at),
        "workspace": worktree.workspace_id,
        "created_at": datetime_output(worktree.created_at),
    }


class GitStatusEntryOutput(serializers.Serializer):
    code = serializers.CharField(help_text="The two porcelain v1 letters, e.g. ' M', '??'.")
    path = serializers.CharField()
    original_path = serializers.CharField(allow_null=True)


class WorktreeRecentFileOutput(serializers.Serializer):
    path = serializers.CharField()
    age_seconds = serializers.IntegerField()


class WorktreeStatusOutput(serializers.Serializer):
    present = serializers.BooleanField(help_text="False when the folder is gone or the worktree is removed.")
    base = serializers.CharField()
    commits_ahead = serializers.IntegerField(allow_null=True)
    uncommitted = serializers.IntegerField()
    changes = GitStatusEntryOutput(many=True)
    recent_files = WorktreeRecentFileOutput(many=True)
    holder = serializers.CharField(allow_null=True)
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    lease_valid = serializers.BooleanField()
    waiting = serializers.IntegerField(help_text="Agents in the claim queue.")
    host = serializers.CharField(help_text="`server`, or the name of the runner whose machine holds the folder.")
    reported_at = serializers.DateTimeField(
        allow_null=True, help_text="On a runner's machine: when its runner last reported this status."
    )


class WorktreeDetailOutput(WorktreeOutput):
    monitor = serializers.SerializerMethodField()

    class Meta(WorktreeOutput.Meta):
        fields = [*WorktreeOutput.Meta.fields, "monitor"]

    @extend_schema_field(WorktreeStatusOutput)
    def get_monitor(self, obj):
        return WorktreeStatusOutput(self.context["status"]).data


class WorktreeClaimOutput(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["granted", "renewed", "queued"])
    position = serializers.IntegerField(allow_null=True, help_text="Place in the queue (1 = next) when queued.")
    worktree = WorktreeOutput()


class ConfigLinkProblemOutput(serializers.Serializer):
    path = serializers.CharField()
    reason = serializers.CharField()


class ConfigWrongLinkOutput(serializers.Serializer):
    path = serializers.CharField()
    points_to = serializers.CharField()


class WorktreeConfigSyncOutput(serializers.Serializer):
    worktree_id = serializers.IntegerField()
    sync_dir = serializers.CharField()
    in_sync = serializers.BooleanField()
    linked = serializers.ListField(child=serializers.CharField())
    missing = serializers.ListField(child=serializers.CharField())
    wrong = ConfigWrongLinkOutput(many=True)
    blocked = ConfigLinkProblemOutput(many=True)
    skipped = ConfigLinkProblemOutput(many=True)
    repaired = serializers.ListField(child=serializers.CharField())
