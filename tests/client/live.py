"""The app under uvicorn for the client, CLI and hook tests, one server per test module.

Import the fixtures into a test module (``from tests.client.live import *``-style, by name).
The server runs against the test database (tests need ``transactional_db``: it only sees
committed rows) with its file roots in a folder of the module's own, so what it writes never
lands in var/. Keys are made per test: the database is emptied between tests.
"""

from pathlib import Path

import pytest
from django.test import override_settings

from sessions_app.keys import api_key_create
from switchyard_client.api.client import Client
from switchyard_client.api.retry import RetryPolicy
from tests.browser.server import ServerProcess, free_port
from tests.factories import AgentFactory
from tests.worker import FILE_ROOTS

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)


@pytest.fixture(scope="module")
def server_roots(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("server-roots")
    roots = {name: base / name.lower() for name in FILE_ROOTS}
    roots["EXPORT_ROOT"] = base / "exports"
    for path in roots.values():
        path.mkdir()
    return roots


@pytest.fixture(scope="module")
def sy_server(django_db_setup, django_db_blocker, server_roots, tmp_path_factory):
    """The app on a free localhost port; its roots are ``server_roots``."""
    settings = {name: server_roots[name] for name in FILE_ROOTS}
    with django_db_blocker.unblock(), override_settings(**settings, EXPORT_ROOTS=[server_roots["EXPORT_ROOT"]]):
        server = ServerProcess(tmp_path_factory.mktemp("server-log") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def agent_key(transactional_db) -> str:
    return api_key_create(agent=AgentFactory(slug="claude-1"), scopes=["agent", "orchestrate"]).key


@pytest.fixture
def other_key(transactional_db) -> str:
    return api_key_create(agent=AgentFactory(slug="codex-2")).key


@pytest.fixture
def sy(sy_server, agent_key):
    with Client(sy_server.url, agent_key, retry=FAST_RETRY, timeout=20) as client:
        yield client


@pytest.fixture
def dead_url() -> str:
    """A localhost URL where nothing listens: connections are refused at once."""
    return f"http://127.0.0.1:{free_port()}"
