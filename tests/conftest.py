import faulthandler
import os
import signal

import pytest
from django.core.cache import cache
from django.db import connections
from rest_framework.test import APIClient

from ledger.webhooks import flag_memo_clear
from sessions_app.keys import api_key_create
from sessions_app.models import AgentApiKey
from tests.factories import AgentFactory, SessionFactory, UserFactory
from tests.schedule import longest_first
from usage.budgets import budgets_exceeded_forget


def pytest_configure(config):
    # .ci/run stops a suite that outlives its limit with SIGTERM: each of its pytest processes then prints
    # where every thread was before it ends, so a hang outside any test (pytest-timeout's reach) names
    # itself. Here, not at import, because conftests are imported while pytest captures fd 2; to a copy of
    # fd 2, because pytest points fd 2 at its capture file while each test runs.
    faulthandler.register(signal.SIGTERM, file=os.dup(2), all_threads=True, chain=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, with PostgreSQL's connection pool closed and any other session on the test
    database ended before the test databases are dropped: open connections made PostgreSQL refuse
    the drop ("being accessed by other users"), which left each worker's test database behind."""
    yield
    with django_db_blocker.unblock():
        for connection in connections.all(initialized_only=True):
            if hasattr(connection, "close_pool"):
                connection.close_pool()
            if connection.vendor == "postgresql":
                # A connection a thread took from the pool and kept (most likely asgiref's executor
                # threads, which serve the in-process websocket tests and live on) is not the pool's to
                # close: end its session, or PostgreSQL refuses the drop ("1 other session using it").
                with connection._nodb_cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()",
                        [connection.settings_dict["NAME"]],
                    )


@pytest.fixture(autouse=True)
def file_roots(settings, tmp_path):
    """Every file root of SPEC §4 in a fresh temporary folder, so tests never touch var/."""
    roots = {}
    for name in (
        "WORKSPACE_ROOT",
        "SAVED_REPORTS_ROOT",
        "STATE_DIR",
        "LOGS_ROOT",
        "REPORTS_DIR",
        "TASK_DEFS_DIR",
        "ARCHIVE_ROOT",
    ):
        roots[name] = tmp_path / "roots" / name.lower()
        roots[name].mkdir(parents=True)
        setattr(settings, name, roots[name])
    roots["EXPORT_ROOT"] = tmp_path / "roots" / "exports"
    roots["EXPORT_ROOT"].mkdir()
    settings.EXPORT_ROOTS = [roots["EXPORT_ROOT"]]
    return roots


@pytest.fixture(autouse=True)
def _clear_cache():
    # Throttle counters and the webhooks flag live in the cache, "no budget exceeded" in process
    # memory (usage/budgets.py); a test must not inherit another's.
    cache.clear()
    flag_memo_clear()
    budgets_exceeded_forget()
    yield


def _client_for(agent, scopes=None) -> APIClient:
    issued = api_key_create(agent=agent, scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    client.agent = agent
    client.key = issued.key
    client.api_key = issued.api_key
    return client


@pytest.fixture
def agent(db):
    return AgentFactory(slug="claude-1")


@pytest.fixture
def other_agent(db):
    return AgentFactory(slug="codex-2")


@pytest.fixture
def agent_client(agent) -> APIClient:
    """An API client authenticated with a key of ``agent``."""
    return _client_for(agent)


@pytest.fixture
def orchestrator_client(db) -> APIClient:
    return _client_for(
        AgentFactory(slug="orchestrator"), scopes=[AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE]
    )


@pytest.fixture
def other_client(other_agent) -> APIClient:
    """A client for another agent, to prove it is refused."""
    return _client_for(other_agent)


@pytest.fixture
def make_agent_client(db):
    return _client_for


@pytest.fixture
def staff_user(db):
    return UserFactory(username="engineer", is_staff=True, is_superuser=True)


@pytest.fixture
def staff_client(staff_user) -> APIClient:
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(staff_user)
    return client


@pytest.fixture
def session(agent):
    return SessionFactory(agent=agent, id="sess-1")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    # Last, so that the order pytest-xdist hands files out in is this one (tests/schedule.py).
    longest_first(items)
