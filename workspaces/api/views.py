"""Workspace files: stream in (PUT), stream out with Range (GET), list, export."""

import mimetypes
import os

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView
from werkzeug.http import parse_range_header

from config.api.errors import DomainError
from config.api.views import actor_from_request, validate_input
from sessions_app.selectors import session_get_for_actor
from workspaces import selectors, services
from workspaces.api import serializers as s
from workspaces.files import fd_range_content, read_chunks
from workspaces.models import Artifact


class SessionFilesView(ListAPIView):
    serializer_class = s.ArtifactOutput

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Artifact.objects.none()
        session = session_get_for_actor(actor=actor_from_request(self.request), session_id=self.kwargs["session_id"])
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
            OpenApiParameter("tool_call", int, description="Id of the tool call that wrote it."),
            OpenApiParameter("tool_use_id", str, description="Or the tool call's client id."),
        ],
        responses={
            201: s.ArtifactWriteOutput,
            200: OpenApiResponse(
                s.ArtifactWriteOutput,
                description="The same bytes as the latest version: no new version (a tool call named is linked).",
            ),
            413: OpenApiResponse(description="Too large."),
        },
        summary="Write a file into the session's workspace (a new version if it exists)",
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
        stream = request.stream
        artifact, version, created = services.artifact_write(
            actor=actor,
            workspace=selectors.session_workspace(session=session),
            path=path,
            chunks=read_chunks(stream) if stream is not None else iter(()),
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
            416: OpenApiResponse(description="Range not satisfiable."),
        },
        parameters=[OpenApiParameter("Range", str, OpenApiParameter.HEADER, description="bytes=START-END")],
        summary="Read a file from the session's workspace (supports HTTP Range)",
    )
    def get(self, request, session_id: str, path: str):
        session = session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        fd, size, logical = services.artifact_open(workspace=selectors.session_workspace(session=session), path=path)
        # request._request: the Django request under DRF's, which says whether this is served by ASGI.
        return _ranged_response(
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


def _ranged_response(
    request, *, fd: int, size: int, name: str, range_header: str | None
) -> StreamingHttpResponse | HttpResponse:
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    start, length, status = 0, size, 200
    if range_header:
        parsed = parse_range_header(range_header)
        window = parsed.range_for_length(size) if parsed is not None and len(parsed.ranges) == 1 else None
        if window is None:
            os.close(fd)
            response = HttpResponse(status=416, content_type=content_type)
            response["Content-Range"] = f"bytes */{size}"
            return response
        start, stop = window
        length, status = stop - start, 206
    response = StreamingHttpResponse(
        fd_range_content(request, fd, start, length), status=status, content_type=content_type
    )
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
    return response


class ArtifactExportView(APIView):
    @extend_schema(
        request=s.ExportInput,
        responses={201: s.ExportOutput, 409: OpenApiResponse(description="Exists and overwrite is false.")},
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
