"""Workspace files: stream in (PUT), stream out with Range (GET), list, export."""

import os

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import DomainError
from config.api.views import actor_from_request, validate_input
from sessions_app.selectors import session_get_for_actor, session_get_for_reader
from workspaces.api import serializers as s
from workspaces.files import selectors, services
from workspaces.files.download_host import download_host_enabled, download_redirect
from workspaces.files.download_response import file_response
from workspaces.files.uploads import read_chunks
from workspaces.models import Artifact


class SessionFilesView(ListAPIView):
    serializer_class = s.ArtifactOutput

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Artifact.objects.none()
        session = session_get_for_reader(actor=actor_from_request(self.request), session_id=self.kwargs["session_id"])
        return selectors.artifacts_in(workspace=selectors.session_workspace(session=session))

    @extend_schema(summary="List the artifacts in the session's workspace, with every version")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class SessionFileView(APIView):
    parser_classes: list = []  # the body is the file, read as a stream, never parsed

    def perform_content_negotiation(self, request, force=False):
        # A download answers whatever the client accepts; errors still render as JSON.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        request={"application/octet-stream": OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter(
                "tool_call",
                {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},
                description="Id of the tool call that wrote it.",
            ),
            OpenApiParameter("tool_use_id", str, description="Or the tool call's client id."),
        ],
        responses={
            201: s.ArtifactWriteOutput,
            200: OpenApiResponse(
                s.ArtifactWriteOutput,
                description="The same bytes as the latest version: no new version (a tool call named is linked).",
            ),
            413: OpenApiResponse(description="Over FILE_UPLOAD_MAX_BYTES; nothing is stored."),
        },
        summary="Write a file into the session's workspace (a new version if it exists)",
        description=(
            "The body is the file's bytes, sent with a Content-Length or with Transfer-Encoding: chunked; "
            "both are streamed to disk, hashed (sha256) and fsynced, and only then acknowledged. A body over "
            "FILE_UPLOAD_MAX_BYTES is refused with 413, and a client that goes away mid-body leaves nothing. "
            "The Content-Type sent is ignored: a download's type comes from the file name."
        ),
    )
    def put(self, request, session_id: str, path: str):
        actor = actor_from_request(request)
        session = session_get_for_actor(actor=actor, session_id=session_id)
        if session.is_terminal:
            raise DomainError(
                f"Session {session.pk!r} is {session.status}; its workspace takes no new files.", code="conflict"
            )
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isdigit() and int(declared) > settings.FILE_UPLOAD_MAX_BYTES:
            raise DomainError(
                f"The file is over the limit of {settings.FILE_UPLOAD_MAX_BYTES} bytes.", code="too_large"
            )
        tool_call = _tool_call(request, session)
        artifact, version, created = services.artifact_write(
            actor=actor,
            workspace=selectors.session_workspace(session=session),
            path=path,
            # Django's request, not DRF's request.stream: DRF takes a body without a
            # Content-Length (Transfer-Encoding: chunked) for an empty one, and an upload was
            # stored as zero bytes. The server has undone the chunking; the body is read to
            # its end either way, under the same size limit.
            chunks=read_chunks(request._request),
            tool_invocation=tool_call,
        )
        artifact = selectors.artifacts_in(workspace=artifact.workspace).get(pk=artifact.pk)
        body = {
            "artifact": s.ArtifactOutput(artifact).data,
            "version": s.ArtifactVersionOutput(version).data,
            "created": created,
        }
        return Response(body, status=201 if created else 200)

    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (206, "application/octet-stream"): OpenApiTypes.BINARY,
            302: OpenApiResponse(
                description="With DOWNLOAD_HOST set and a person's login session: a signed link on that host."
            ),
            416: OpenApiResponse(description="Range not satisfiable."),
        },
        parameters=[OpenApiParameter("Range", str, OpenApiParameter.HEADER, description="bytes=START-END")],
        summary="Read a file from the session's workspace (supports HTTP Range)",
        description=(
            "Every answer carries X-Content-Type-Options: nosniff and Content-Security-Policy: sandbox; "
            "default-src 'none'. Plain text (.txt, .log), PNG, JPEG, GIF, WebP and PDF are served inline with "
            "their type; every other file is Content-Disposition: attachment as application/octet-stream."
        ),
    )
    def get(self, request, session_id: str, path: str):
        actor = actor_from_request(request)
        session = session_get_for_reader(actor=actor, session_id=session_id)
        workspace = selectors.session_workspace(session=session)
        fd, size, logical = services.artifact_open(workspace=workspace, path=path)
        if actor.agent is None and download_host_enabled():
            # A person's browser: the bytes come from the download host (workspaces/files/download_host.py).
            os.close(fd)
            return download_redirect(request, workspace=workspace, path=logical)
        # request._request: the Django request under DRF's, which says whether this is served by ASGI.
        return file_response(
            request._request, fd=fd, size=size, name=logical, range_header=request.headers.get("Range")
        )


def _tool_call(request, session):
    raw_id = request.query_params.get("tool_call")
    client_id = request.query_params.get("tool_use_id")
    if raw_id:
        if not raw_id.isdigit() or len(raw_id) > 18:
            raise DomainError("tool_call must be a tool call id (an integer).")
        return selectors.tool_call_in_session(session=session, tool_call_id=int(raw_id))
    if client_id:
        return selectors.tool_call_in_session(session=session, client_id=client_id)
    return None


class ArtifactExportView(APIView):
    @extend_schema(
        request=s.ExportInput,
        responses={
            201: s.ExportOutput,
            409: OpenApiResponse(
                description="Exists and overwrite is false; or overwrite of a file this agent did not export (staff may)."
            ),
        },
        summary="Copy an artifact's file out to a configured export root",
    )
    def post(self, request, artifact_id: int):
        actor = actor_from_request(request)
        data = validate_input(s.ExportInput, request.data)
        artifact = selectors.artifact_get_for_actor(actor=actor, artifact_id=artifact_id)
        target, sha256, size = services.artifact_export(
            actor=actor, artifact=artifact, destination=data["destination"], overwrite=data["overwrite"]
        )
        return Response({"destination": str(target), "sha256": sha256, "size": size}, status=201)
