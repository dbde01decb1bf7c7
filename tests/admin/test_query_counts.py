"""Changelists cost the same number of queries for 1 row as for 30: no query per row."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board.models import Task
from sessions_app.models import AgentSession
from tests.admin.factories import ROW_BUILDERS, admin_url

pytestmark = pytest.mark.django_db
MANY = 30


def _queries_for(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def _assert_flat(client, model, django_assert_num_queries) -> None:
    url = admin_url(model, "changelist")
    ROW_BUILDERS[model]()
    client.get(url)  # warm up: the first request loads per-process caches (content types)
    one_row = _queries_for(client, url)

    for _ in range(MANY - 1):
        ROW_BUILDERS[model]()

    with django_assert_num_queries(one_row):
        response = client.get(url)
    assert len(response.context["cl"].result_list) >= MANY


def test_task_changelist_queries_do_not_grow_with_rows(admin_client, django_assert_num_queries):
    _assert_flat(admin_client, Task, django_assert_num_queries)


def test_session_changelist_queries_do_not_grow_with_rows(admin_client, django_assert_num_queries):
    _assert_flat(admin_client, AgentSession, django_assert_num_queries)


@pytest.mark.parametrize(
    "model", [m for m in ROW_BUILDERS if m not in (Task, AgentSession)], ids=lambda m: m._meta.label
)
def test_every_other_changelist_queries_do_not_grow_with_rows(admin_client, model, django_assert_num_queries):
    _assert_flat(admin_client, model, django_assert_num_queries)
