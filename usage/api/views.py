from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.response import Response
from rest_framework.views import APIView

from board.models import Campaign, Task
from config.api.errors import DomainError
from config.api.views import actor_from_request, validate_input
from config.pages import BOARD
from sessions_app.models import Agent
from usage import budget_selectors, budgets, extract, otlp, selectors, services
from usage.api import serializers as s
from usage.api.parsers import OtlpJsonParser, OtlpProtobufParser, RawBody
from usage.models import Budget

BUDGETS_LISTED = 500  # budgets are set by people: a few per task, agent and campaign

_STATUS_SCHEMA = {
    "type": "object",
    "description": "A google.rpc.Status in the OTLP JSON mapping.",
    "properties": {
        "code": {"type": "integer", "description": "A google.rpc.Code: 3 (INVALID_ARGUMENT) for a bad body."},
        "message": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["message"],
}


def _otlp_schema(signal: otlp.Signal, resources: str, rejected: str, what: str):
    export = {
        "type": "object",
        "description": f"An Export{signal.name.title()}ServiceRequest in the OTLP JSON mapping (camelCase, int64 as "
        "strings, trace and span ids in hex); unknown fields are ignored.",
        "properties": {resources: {"type": "array", "nullable": True, "items": {"type": "object"}}},
    }
    answer = {
        "type": "object",
        "description": f"An Export{signal.name.title()}ServiceResponse; partialSuccess only when some were refused.",
        "properties": {
            "partialSuccess": {
                "type": "object",
                "properties": {rejected: {"type": "string"}, "errorMessage": {"type": "string"}},
            }
        },
    }
    return extend_schema(
        request={otlp.PROTOBUF: OpenApiTypes.BINARY, otlp.JSON: export},
        responses={
            (200, otlp.JSON): answer,
            (200, otlp.PROTOBUF): OpenApiTypes.BINARY,
            400: OpenApiResponse(_STATUS_SCHEMA, description="A body that is not what it says it is."),
            413: OpenApiResponse(
                _STATUS_SCHEMA,
                description="Over OTLP_MAX_BODY_BYTES (also once inflated) or OTLP_MAX_RECORDS; the message says which.",
            ),
        },
        summary=f"OTLP/HTTP {signal.name} receiver (an agent's key in the exporter's Authorization header)",
        description=f"Point an OpenTelemetry exporter at `/api/v1/otlp` ({what}). The body is protobuf "
        "(application/x-protobuf) or OTLP JSON (application/json), optionally with Content-Encoding: gzip, at "
        "most OTLP_MAX_BODY_BYTES (4 MiB) before and after inflating, with at most OTLP_MAX_RECORDS (10,000) log "
        "records, spans or data points. The export response (200) is in the request's own "
        "encoding; a bad body (400) or one too large (413) is answered with a google.rpc.Status in JSON. An export "
        "resent after a lost answer adds nothing twice.",
    )


class _OtlpView(APIView):
    """An agent's key (scopes agent or orchestrate); a runner's key (run) is refused."""

    parser_classes = [OtlpProtobufParser, OtlpJsonParser]
    signal: otlp.Signal

    def usage_in(self, message) -> extract.Extracted:
        return extract.Extracted(items=[])

    def post(self, request):
        raw = request.data  # DRF answers 415 for a content type neither parser takes
        encoding = raw.encoding if isinstance(raw, RawBody) else _empty_body_encoding(request)
        try:
            if isinstance(raw, RawBody) and raw.too_large:
                raise otlp.BodyInvalid(
                    f"The body is over {settings.OTLP_MAX_BODY_BYTES} bytes (OTLP_MAX_BODY_BYTES): send it in smaller "
                    "batches.",
                    status=413,
                )
            body = otlp.inflate(
                raw.data if isinstance(raw, RawBody) else b"",
                content_encoding=request.headers.get("Content-Encoding", ""),
                limit=settings.OTLP_MAX_BODY_BYTES,
            )
            message = otlp.decode(self.signal, body, encoding=encoding, max_records=settings.OTLP_MAX_RECORDS)
        except otlp.BodyInvalid as exc:
            if exc.status == 415:
                raise UnsupportedMediaType(request.content_type, detail=exc.message) from None
            # In JSON whatever the request's encoding (OTLP asks for its own): the API's error middleware
            # turns any other error body into a generic JSON message, losing what was wrong.
            code = otlp.RESOURCE_EXHAUSTED if exc.status == 413 else otlp.INVALID_ARGUMENT
            body = otlp.status_body(exc.message, code=code, encoding=otlp.JSON)
            return HttpResponse(body, status=exc.status, content_type=otlp.JSON)
        found = self.usage_in(message)
        services.usage_records_ingest(actor=actor_from_request(request), items=found.items)
        answer = otlp.export_response(self.signal, rejected=found.rejected, error=found.error, encoding=encoding)
        return HttpResponse(answer, content_type=encoding)


def _empty_body_encoding(request) -> str:
    media = (request.content_type or "").split(";")[0].strip().lower()
    if not media:
        return otlp.JSON  # no body at all: an empty export, answered in JSON
    if media not in (otlp.PROTOBUF, otlp.JSON):
        raise UnsupportedMediaType(media or "none", detail="Send application/x-protobuf or application/json.")
    return media


class OtlpLogsView(_OtlpView):
    signal = otlp.LOGS

    @_otlp_schema(otlp.LOGS, "resourceLogs", "rejectedLogRecords", "Claude Code's claude_code.api_request events")
    def post(self, request):
        return super().post(request)

    def usage_in(self, message) -> extract.Extracted:
        return extract.logs_usage(message)


class OtlpMetricsView(_OtlpView):
    signal = otlp.METRICS

    @_otlp_schema(
        otlp.METRICS,
        "resourceMetrics",
        "rejectedDataPoints",
        "taken and not stored: claude_code.token.usage and claude_code.cost.usage sum the same requests as "
        "the api_request log records, which are stored",
    )
    def post(self, request):
        return super().post(request)


class OtlpTracesView(_OtlpView):
    signal = otlp.TRACES

    @_otlp_schema(otlp.TRACES, "resourceSpans", "rejectedSpans", "GenAI semantic-convention spans: gen_ai.*")
    def post(self, request):
        return super().post(request)

    def usage_in(self, message) -> extract.Extracted:
        return extract.traces_usage(message)


class UsageRollupView(APIView):
    @extend_schema(
        parameters=[s.UsageQueryInput],
        responses=s.UsageRollupOutput,
        summary="Tokens and cost per agent, task, campaign or day",
        description="Sums of the usage rows (from OTLP) per group, largest cost first (days oldest first). An "
        "agent sees its own usage; staff and orchestrating keys see every agent's.",
    )
    def get(self, request):
        # An empty parameter (?until=) is one not given.
        query = s.UsageQueryInput(data={k: v for k, v in request.query_params.dict().items() if v != ""})
        query.is_valid(raise_exception=True)
        rows = selectors.usage_rollup(actor=actor_from_request(request), **query.validated_data)
        return Response(s.UsageRollupOutput({"group_by": query.validated_data["group_by"], "results": rows}).data)


def _budget_target(data: dict):
    """The task, campaign and agent a create names; a name that matches nothing is a 400."""
    found = {}
    for name, model, key in (("task", Task, "pk"), ("campaign", Campaign, "pk"), ("agent", Agent, "slug")):
        if data.get(name) is None:
            continue
        found[name] = model.objects.filter(**{key: data[name]}).first()
        if found[name] is None:
            raise DomainError(f"No {name} {data[name]!r}: name an existing one.", code="not_found")
    return found


class BudgetListView(APIView):
    allowed_groups = BOARD  # people who work the board set budgets here as on the card panel

    @extend_schema(
        parameters=[
            OpenApiParameter("scope", str, enum=Budget.Scope.values, description="Only budgets of this scope."),
        ],
        responses=s.BudgetOutput(many=True),
        summary="Budgets, with what each has spent",
        description="People who work the board, staff and orchestrating keys see every budget; an agent the ones "
        "that apply to it (its own, the day's, and those of the tasks it holds and their campaigns).",
    )
    def get(self, request):
        budgets = budget_selectors.budgets_visible_to(actor=actor_from_request(request))
        scope = request.query_params.get("scope")
        if scope:
            if scope not in Budget.Scope.values:
                raise DomainError(f"scope must be one of {', '.join(Budget.Scope.values)}.")
            budgets = budgets.filter(scope=scope)
        listed = list(budgets.order_by("scope", "id")[:BUDGETS_LISTED])
        rows = budget_selectors.budgets_status(budgets=listed)
        return Response(s.BudgetOutput(rows, many=True).data)

    @extend_schema(
        request=s.BudgetCreateInput,
        responses={201: s.BudgetOutput},
        summary="Set a budget (tokens and/or USD) on a task, an agent, a campaign or each day",
        description="For people who work the board, staff and orchestrating keys (403 otherwise). One budget per "
        "task, agent, campaign, agent's day and the all-agents day: a second is a 409.",
    )
    def post(self, request):
        actor = actor_from_request(request)
        data = validate_input(s.BudgetCreateInput, request.data)
        target = _budget_target(data)
        budget = budgets.budget_create(
            actor=actor,
            scope=data["scope"],
            target=target.get("task") or target.get("campaign"),
            agent=target.get("agent"),
            limit_tokens=data.get("limit_tokens"),
            limit_usd=data.get("limit_usd"),
        )
        return Response(s.BudgetOutput(budget_selectors.budget_status(budget)).data, status=201)


class BudgetDetailView(APIView):
    allowed_groups = BOARD

    @extend_schema(responses=s.BudgetOutput, summary="Read a budget")
    def get(self, request, budget_id: int):
        budget = budget_selectors.budget_get_for_actor(actor=actor_from_request(request), budget_id=budget_id)
        return Response(s.BudgetOutput(budget_selectors.budget_status(budget)).data)

    @extend_schema(
        request=s.BudgetUpdateInput,
        responses=s.BudgetOutput,
        summary="Change a budget's limits (raise it to let the work go on)",
        description="A limit raised above the spend clears the exceeded state, records budget.raised and answers "
        "every session waiting on the budget: its next tool use goes on.",
    )
    def patch(self, request, budget_id: int):
        actor = actor_from_request(request)
        budget = budget_selectors.budget_get_for_actor(actor=actor, budget_id=budget_id)
        data = validate_input(s.BudgetUpdateInput, request.data)
        budget = budgets.budget_update(actor=actor, budget=budget, **data)
        return Response(s.BudgetOutput(budget_selectors.budget_status(budget)).data)

    @extend_schema(request=None, responses={204: None}, summary="Remove a budget")
    def delete(self, request, budget_id: int):
        actor = actor_from_request(request)
        budget = budget_selectors.budget_get_for_actor(actor=actor, budget_id=budget_id)
        budgets.budget_delete(actor=actor, budget=budget)
        return Response(status=204)
