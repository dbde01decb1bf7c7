"""Import endpoints: a priority file (REPORTS_DIR) into tasks, a campaign definition (TASK_DEFS_DIR).

Staff or an agent key with the 'orchestrate' scope; checked before the body is read.
"""

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from board.api import import_serializers as s
from board.api.serializers import CampaignOutput
from board.imports.campaigns import campaign_files, campaign_import
from board.imports.priorities import priorities_apply, priorities_files, priorities_preview
from board.selectors import campaign_get
from board.services import require_orchestrator
from config.api.views import actor_from_request, validate_input

BAD_FILE = OpenApiResponse(description="Bad file name, too big, not UTF-8, invalid content: the message says which.")
MISSING = OpenApiResponse(description="No such file in the folder.")


class PriorityFileListView(APIView):
    @extend_schema(responses=s.ImportFileOutput(many=True), summary="List the priority files in REPORTS_DIR")
    def get(self, request):
        require_orchestrator(actor=actor_from_request(request), what="Listing priority files")
        return Response(s.ImportFileOutput(priorities_files(), many=True).data)


class PriorityImportView(APIView):
    @extend_schema(
        request=s.PriorityImportInput,
        responses={
            200: PolymorphicProxySerializer(
                component_name="PriorityImportResult",
                serializers=[s.PriorityPreviewOutput, s.PriorityApplyOutput],
                resource_type_field_name=None,
            ),
            400: BAD_FILE,
            404: MISSING,
        },
        summary="Import a priority file: preview (dry_run) or apply (staff or an orchestrating agent)",
    )
    def post(self, request):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Importing priority files")
        data = validate_input(s.PriorityImportInput, request.data)
        if data["dry_run"]:
            return Response(s.preview_data(priorities_preview(file_name=data["file"])))
        return Response(s.apply_data(priorities_apply(actor=actor, file_name=data["file"])))


class CampaignFileListView(APIView):
    @extend_schema(responses=s.ImportFileOutput(many=True), summary="List the campaign definitions in TASK_DEFS_DIR")
    def get(self, request):
        require_orchestrator(actor=actor_from_request(request), what="Listing campaign definitions")
        return Response(s.ImportFileOutput(campaign_files(), many=True).data)


class CampaignImportView(APIView):
    @extend_schema(
        request=s.CampaignImportInput,
        responses={
            201: OpenApiResponse(s.CampaignImportOutput, description="The campaign was created."),
            200: OpenApiResponse(s.CampaignImportOutput, description="It existed: updated, nothing duplicated."),
            400: BAD_FILE,
            404: MISSING,
        },
        summary="Import a campaign definition (staff or an orchestrating agent)",
    )
    def post(self, request):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Importing campaigns")
        data = validate_input(s.CampaignImportInput, request.data)
        result = campaign_import(actor=actor, file_name=data["file"])
        body = {
            "created": result.created,
            "campaign": CampaignOutput(campaign_get(campaign_id=result.campaign.pk)).data,
            "campaign_fields": result.campaign_fields,
            "tasks_created": result.tasks_created,
            "tasks_updated": result.tasks_updated,
            "leads_created": result.leads_created,
        }
        return Response(body, status=201 if result.created else 200)
