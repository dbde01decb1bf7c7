"""The OpenAPI schema is true to the code, as a client generator reads it: schemathesis fuzzes
every operation of /api/schema/ in-process (every check it has, valid and invalid requests,
its examples, coverage and fuzzing phases) and asserts no 5xx, every response matches its
documented status, headers and body, schema-valid requests are accepted and schema-invalid
ones refused, and a refused request writes no row.

Bounded and stable: 15 examples per operation, in-process (no server, no port), derandomized (the
same examples every run), no deadline, no shrinking; about 1.5 min on SQLite, 2 on PostgreSQL.
Each operation is an item of its own whose cases schemathesis builds when it runs (a lazy schema
from a fixture), not at collection: collected in every pytest-xdist worker, building them cost each
worker 25 s of CPU. Runs in plain `make test`, or alone with `-m schema`. On the code before issue 12 it failed 21 of
the 51 operations (ST202 x14, ST201 x5, ST108 x2; the first failure of each)."""

import json
import re

import pytest
import schemathesis
from django.apps import apps
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, reject, settings
from schemathesis.checks import CHECKS
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import negative_data_rejection

from runners.models import Run
from runners.services import runner_key_create
from sessions_app.keys import api_key_create
from sessions_app.models import AgentApiKey
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory, ToolCallFactory
from workspaces.models import Repository

pytestmark = [pytest.mark.schema, pytest.mark.django_db]

MAX_EXAMPLES = 15


def _openapi() -> dict:
    """The schema exactly as /api/schema/ serves it."""
    spec = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(spec, renderer_context={}))


# Path ids point at rows the `world` fixture makes, so requests reach the code past the lookup;
# the coverage phase still sends ids that exist nowhere (404s) and malformed ones.
SESSION_ID = "sess-conf"
TASK_ID = "900001"
CAMPAIGN_ID = "900002"
TOOL_CALL_ID = "900003"
TOOL_USE_ID = "toolu_conf"
RUN_ID = "900004"

CONFIG = {
    "suppress-health-check": ["all"],
    "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none", "no-shrink": True},
    "checks": {
        "enabled": True,
        # 413 is a refusal too: a batch over API_MAX_BATCH_ITEMS (the schema's maxItems).
        "negative_data_rejection": {
            "expected-statuses": [
                "400",
                "401",
                "403",
                "404",
                "405",
                "406",
                "409",
                "413",
                "415",
                "422",
                "428",
                "429",
            ]
        },
    },
    "parameters": {
        "path.session_id": SESSION_ID,
        "path.task_id": TASK_ID,
        "path.campaign_id": CAMPAIGN_ID,
        "path.tool_call_id": TOOL_CALL_ID,
        "path.client_id": TOOL_USE_ID,
        "path.run_id": RUN_ID,
    },
}
OPENAPI = _openapi()
OPERATION_KEYS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
# Each operation is an item of its own (pytest-xdist runs items by node id), parametrized by its label.
OPERATIONS = [
    f"{method.upper()} {path}" for path, item in OPENAPI["paths"].items() for method in item if method in OPERATION_KEYS
]
# The fixture hands schemathesis the schema the item needs: its coverage cases are built when the item
# runs, in the one worker that runs this file, not at collection in every worker (25 s of CPU each).
lazy_schema = schemathesis.pytest.from_fixture("operation_schema")
_APP = WSGIHandler()
# The whole schema, for the files that check single answers against it (tests/runners/*_schema.py).
schema = schemathesis.openapi.from_dict(OPENAPI, config=SchemathesisConfig.from_dict(CONFIG))
schema.app = _APP


@pytest.fixture(params=OPERATIONS)
def operation_schema(request):
    """The schema with only this item's path in it, its other methods turned off (they stay
    documented: the coverage phase checks the `Allow` header of a 405 against them)."""
    # schemathesis 4.32's lazy loader reads the item's `_nodeid` (for its reports), which pytest 9 renamed.
    request.node._nodeid = request.node.nodeid
    path = request.param.partition(" ")[2]
    others = [label for label in OPERATIONS if label.partition(" ")[2] == path and label != request.param]
    # By name, so only the documented ones: the coverage phase's cases of undocumented methods
    # (405s) belong to this item. (A config entry's include-path and include-method would each match.)
    others_off = [{"include-name": others, "enabled": False}] if others else []
    config = SchemathesisConfig.from_dict({**CONFIG, "operations": others_off})
    schema = schemathesis.openapi.from_dict({**OPENAPI, "paths": {path: OPENAPI["paths"][path]}}, config=config)
    schema.app = _APP
    return schema


# What only staff or an orchestrating agent may do: fuzzed with an orchestrator's key, so the
# bodies are judged rather than every request refused with 403.
ORCHESTRATE = {
    ("POST", "/api/v1/tasks/"),
    ("POST", "/api/v1/campaigns/"),
    ("POST", "/api/v1/campaigns/import/"),
    ("POST", "/api/v1/priorities/import/"),
    ("POST", "/api/v1/sync/"),
    ("GET", "/api/v1/sync/issues/"),
    ("POST", "/api/v1/tasks/{task_id}/runs/"),
    ("POST", "/api/v1/runs/{run_id}/cancel/"),
    # issue 26 §2: a waiting run answered or re-queued (the fuzzed run is queued: 409s).
    ("POST", "/api/v1/runs/{run_id}/answer/"),
    ("POST", "/api/v1/runs/{run_id}/requeue/"),
    # SPEC §10: the task's change, runs, comments and review read and written as an orchestrator does.
    ("GET", "/api/v1/tasks/{task_id}/diff/"),
    ("GET", "/api/v1/tasks/{task_id}/runs/"),
    ("GET", "/api/v1/tasks/{task_id}/comments/"),
    ("POST", "/api/v1/tasks/{task_id}/comments/"),
    ("POST", "/api/v1/tasks/{task_id}/review/"),
    ("POST", "/api/v1/tasks/{task_id}/merge/"),
    ("POST", "/api/v1/tasks/{task_id}/merge/resolve/"),
    ("POST", "/api/v1/tasks/{task_id}/pull-request/"),
}

# The runner protocol (SPEC §8): fuzzed with a runner's key (scope 'run'), so the bodies are judged.
RUNNER = {
    ("POST", "/api/v1/runners/me/heartbeat/"),
    ("POST", "/api/v1/runners/me/next/"),
    ("POST", "/api/v1/runs/{run_id}/status/"),
    ("POST", "/api/v1/runs/{run_id}/log/"),
}

OUR_APPS = ("sessions_app", "ledger", "board", "workspaces", "runners", "usage")


def row_counts() -> dict[str, int]:
    """Each of our tables' rows, counted in one statement: asked twice for every example (a thousand
    examples a run), a query per table made this the file's largest cost on PostgreSQL."""
    tables = sorted(
        {
            model._meta.db_table
            for name in OUR_APPS
            for model in apps.get_app_config(name).get_models()
            if model._meta.managed and not model._meta.proxy
        }
    )
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {quote(table)})" for table in tables))
        return dict(zip(tables, cursor.fetchone(), strict=True))


@pytest.fixture
def world(db, settings):
    """An agent with a key, its session, a task, a campaign and a tool call at the pinned ids,
    and an orchestrating agent."""
    agent = AgentFactory(slug="conformance")
    session = SessionFactory(agent=agent, id=SESSION_ID)
    CampaignFactory(pk=int(CAMPAIGN_ID))
    TaskFactory(pk=int(TASK_ID), title="Fuzz me")
    ToolCallFactory(pk=int(TOOL_CALL_ID), session=session, agent=agent, client_id=TOOL_USE_ID)
    Run.objects.create(pk=int(RUN_ID), task=TaskFactory(title="Run me"), provider="claude")
    orchestrator = AgentFactory(slug="conductor")
    _, runner_key, _ = runner_key_create(name="conformance-runner")
    settings.RUNNER_POLL_MAX_SECONDS = 0  # the long poll answers at once: 15 examples, not 15 waits
    # Production's key cache (the test settings turn it off): a thousand requests of one key are
    # not a thousand lookups of it, a tenth of the app's CPU here. A revocation or pause the fuzzed
    # requests make clears it in this process, as in production.
    settings.API_KEY_CACHE_SECONDS = 2
    return {
        "runner": runner_key.key,
        "agent": api_key_create(agent=agent).key,
        "orchestrator": api_key_create(
            agent=orchestrator, scopes=[AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE]
        ).key,
    }


@pytest.fixture
def in_transaction():
    # The WSGI handler closes "old" connections at each request's start and end; inside the
    # test's transaction that would close the test's own connection (the test client does the same).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _truthy(value) -> bool:
    return str(value).lower() in ("true", "1", "yes")


def _has_nul_key(value) -> bool:
    if isinstance(value, dict):
        return any("\x00" in key or _has_nul_key(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul_key(item) for item in value)
    return False


def _not_schema_valid(case) -> bool:
    """A "positive" case that the schema itself forbids: the generator sometimes puts NUL into an
    object key although every free-form object's ``propertyNames`` pattern excludes it (seen on
    POST /sessions/ metadata once the runner operations changed the derandomized examples)."""
    return _has_nul_key(case.body)


def _mutates_our_headers(case) -> bool:
    header = case.meta.components.get(ParameterLocation.HEADER)
    return header is not None and header.mode.is_negative


def _refused_item_by_item(response) -> bool:
    """A batch's 207 (multi-status) in which at least one item was refused with a 4xx."""
    if response.status_code != 207:
        return False
    results = response.json().get("results", [])
    return any(400 <= result.get("status", 0) < 500 for result in results)


_PROVIDER = re.compile(r"[A-Za-z0-9._-]{1,64}\Z")


def _breaks_an_unstatable_rule(case) -> bool:
    """The rules OpenAPI 3.0 cannot state (each operation's description says them): a request
    that breaks one is refused with a 400 although every part of it matches the schema."""
    body = case.body if isinstance(case.body, dict) else {}
    if case.path == "/api/v1/sync/":
        # ties a query parameter to the body: ?wait=true needs a session
        return _truthy((case.query or {}).get("wait", "")) and not body.get("session")
    creates = case.path in ("/api/v1/tasks/", "/api/v1/campaigns/") and case.method.upper() == "POST"
    if creates and body.get("repository") and not Repository.objects.filter(name=body["repository"]).exists():
        return True  # names a repository: it must be a registered one
    if case.path == "/api/v1/tasks/{task_id}/review/" and isinstance(body.get("decision"), str):
        # approve takes no message, comments or provider; ask_review no comments; request_changes needs a
        # message or comments
        if body["decision"] == "approve":
            return bool(body.get("message") or body.get("comments") or "provider" in body)
        if body["decision"] == "ask_review":
            return bool(body.get("comments"))
        return not (str(body.get("message") or "").strip() or body.get("comments"))
    if case.path in ("/api/v1/runners/me/heartbeat/", "/api/v1/runners/me/next/"):
        memory = body.get("memory") if isinstance(body.get("memory"), dict) else {}
        numbers = isinstance(memory.get("available_mb"), int) and isinstance(memory.get("total_mb"), int)
        if numbers and memory["available_mb"] > memory["total_mb"]:
            return True  # compares two numbers
        # The schema names the keys (propertyNames: provider names), which schemathesis does not generate by.
        maps = [body.get("room"), memory.get("needs_mb")]
        return any(isinstance(m, dict) and any(not _PROVIDER.match(k) for k in m) for m in maps)
    if case.path == "/api/v1/tasks/{task_id}/merge/" and body.get("force") is True:
        return True  # force is staff's: an orchestrate key is refused (403)
    if case.path == "/api/v1/campaigns/" and case.method.upper() == "POST":
        # compares two dates
        return "starts_on" in body and "ends_on" in body and str(body["ends_on"]) < str(body["starts_on"])
    return False


@lazy_schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, print_blob=False, database=None)
def test_every_operation_conforms_to_the_schema(case, world, in_transaction, request):
    # The item fuzzes the one operation it is named for (its fixture's schema holds only that one).
    assert case.operation.label == request.node.callspec.params["operation_schema"]
    positive = case.meta and case.meta.generation.mode.is_positive
    if positive and (_not_schema_valid(case) or _breaks_an_unstatable_rule(case)):
        reject()
    if case.meta and not positive and _mutates_our_headers(case):
        # We send our own Authorization below, so a case whose broken part was that header is not
        # the case schemathesis thinks it sends; what is left of it may be valid (a body mutated
        # only inside one branch of an anyOf) and then rightly accepted.
        reject()
    operation = (case.method.upper(), case.path)
    key = world["orchestrator" if operation in ORCHESTRATE else "runner" if operation in RUNNER else "agent"]
    before = row_counts()

    response = case.call(headers={"Authorization": f"Bearer {key}"})

    after = row_counts()
    excluded = []
    if not positive and _refused_item_by_item(response):
        # A batch endpoint (events, tool calls) stores the good items and answers 207 with each bad
        # one's 400 in `results` (SPEC §6): the refusal of the schema-breaking item is there.
        excluded = [negative_data_rejection]
    case.validate_response(
        response, checks=CHECKS.get_all(), excluded_checks=excluded, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code < 500
    if response.status_code >= 400:
        assert after == before, f"{case.method} {case.path} answered {response.status_code} but wrote rows"


def test_each_operation_is_an_item_with_an_id_of_its_own(request):
    # pytest-xdist runs items by node id: operations sharing one id would run once (schemathesis's own
    # parametrize gave them one; the operation_schema fixture's params give each its own).
    items = [i for i in request.session.items if i.originalname == "test_every_operation_conforms_to_the_schema"]
    if not items:
        pytest.skip("the operations' items were deselected")
    assert all(item.nodeid.endswith(f"::{item.name}") for item in items)
    assert len({item.nodeid for item in items}) == len(items)
