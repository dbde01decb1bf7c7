from rest_framework import serializers

from config.api.fields import StrictSerializer
from workspaces.models import Artifact, ArtifactVersion, Workspace


class WorkspaceOutput(serializers.ModelSerializer):
    path = serializers.CharField(source="root_path")

    class Meta:
        model = Workspace
        fields = ["id", "kind", "path", "status"]


class ArtifactVersionOutput(serializers.ModelSerializer):
    class Meta:
        model = ArtifactVersion
        fields = ["number", "size", "sha256", "source", "backup_location", "created_at"]


class ArtifactOutput(serializers.ModelSerializer):
    versions = ArtifactVersionOutput(many=True, read_only=True)
    tool_call = serializers.PrimaryKeyRelatedField(source="tool_invocation", read_only=True, allow_null=True)

    class Meta:
        model = Artifact
        fields = [
            "id",
            "path",
            "kind",
            "size",
            "sha256",
            "mime_type",
            "source",
            "tool_call",
            "versions",
            "created_at",
            "updated_at",
        ]


class ArtifactWriteOutput(serializers.Serializer):
    artifact = ArtifactOutput()
    version = ArtifactVersionOutput()
    created = serializers.BooleanField(help_text="False when the bytes equal the latest version (nothing added).")


class ExportInput(StrictSerializer):
    destination = serializers.CharField(max_length=4096, help_text="Absolute path inside one of EXPORT_ROOTS.")
    overwrite = serializers.BooleanField(required=False, default=False)


class ExportOutput(serializers.Serializer):
    destination = serializers.CharField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
