"""OTLP bodies are read as bytes here and decoded in the view (usage.otlp), where a bad body is
answered in the OTLP way (a google.rpc.Status in the request's own encoding), not as DRF's JSON."""

from dataclasses import dataclass

from django.conf import settings
from rest_framework.parsers import BaseParser

from usage.otlp import JSON, PROTOBUF


@dataclass(frozen=True)
class RawBody:
    data: bytes
    encoding: str  # PROTOBUF or JSON
    too_large: bool = False


class _RawParser(BaseParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.OTLP_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            return RawBody(b"", self.media_type, too_large=True)  # not read at all
        data = stream.read(limit + 1) if stream is not None else b""
        return RawBody(data, self.media_type, too_large=len(data) > limit)


class OtlpProtobufParser(_RawParser):
    media_type = PROTOBUF


class OtlpJsonParser(_RawParser):
    media_type = JSON
