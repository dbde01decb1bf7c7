"""Restoring an archived workspace: staff only; the restore itself runs in a worker."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.fields import StrictSerializer
from config.api.views import actor_from_request, validate_input
from workspaces.api.serializers import WorkspaceOutput
from workspaces.archive.restore import workspace_restore_request
from workspaces.models import Workspace


class ArchiveOutput(serializers.ModelSerializer):
    location = serializers.CharField(source="archive_location")
    size = serializers.IntegerField(source="archive_size", allow_null=True)
    sha256 = serializers.CharField(source="archive_sha256")

    class Meta:
        model = Workspace
        fields = ["location", "size", "sha256"]


class WorkspaceRestoreOutput(serializers.Serializer):
    restore = serializers.CharField(help_text="queued (a worker restores it), or already_active (nothing to do).")
    workspace = WorkspaceOutput()
    archive = ArchiveOutput()


class WorkspaceRestoreView(APIView):
    @extend_schema(
        request=None,
        responses={
            202: OpenApiResponse(WorkspaceRestoreOutput, description="Queued: a worker restores and verifies it."),
            200: OpenApiResponse(WorkspaceRestoreOutput, description="Active already: nothing to do."),
            403: OpenApiResponse(description="Only staff restore workspaces (agents are refused)."),
            404: OpenApiResponse(description="No such workspace."),
            409: OpenApiResponse(description="Removed, or being archived right now."),
        },
        summary="Restore an archived workspace from its verified archive (staff)",
    )
    def post(self, request, workspace_id: int):
        actor = actor_from_request(request)
        validate_input(StrictSerializer, request.data)
        workspace, queued = workspace_restore_request(actor=actor, workspace_id=workspace_id)
        restore = "queued" if queued else "already_active"
        body = WorkspaceRestoreOutput({"restore": restore, "workspace": workspace, "archive": workspace}).data
        return Response(body, status=202 if queued else 200)
