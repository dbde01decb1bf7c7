"""Request lines never carry credentials: a key put in a URL's query string is refused (only the
Authorization header authenticates) and masked in every log line that shows the URL."""

import logging

import httpx
import pytest

from config.log_filters import REQUEST_LOGGERS, CredentialsMasked
from tests.browser.server import module_server

KEY = "sy_0a1b2c3d_Q2hlY2tUaGlzT3V0VGhpc0lzQUZha2VLZXkxMjM"
SECRETS = {
    "api_key": KEY,
    "token": "Tk9zYXJjaGl2ZWQ4Nw",
    "password": "Pw0rdInUrl77",
    "key": "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
}
QUERY = "&".join(f"{name}={value}" for name, value in SECRETS.items()) + "&page=2"


def test_every_request_logger_has_the_filter():
    for name in REQUEST_LOGGERS:
        assert any(isinstance(f, CredentialsMasked) for f in logging.getLogger(name).filters), name


def test_an_access_line_is_masked_in_its_arguments_as_uvicorn_logs_it(caplog):
    # given uvicorn's own call: the path with its query string is an argument, not the message
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", f"/api/v1/sessions/?{QUERY}", "1.1", 401
        )

    (record,) = [r for r in caplog.records if r.name == "uvicorn.access"]
    line = record.getMessage()
    for secret in SECRETS.values():
        assert secret not in line
    assert (
        record.args[2]
        == "/api/v1/sessions/?api_key=[REDACTED]&token=[REDACTED]&password=[REDACTED]&key=[REDACTED]&page=2"
    )
    assert line.startswith('127.0.0.1:5000 - "GET /api/v1/sessions/?api_key=[REDACTED]&')


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    process = module_server(django_db_blocker, tmp_path_factory, "log")
    yield process
    process.stop()


def test_the_servers_access_log_masks_keys_in_query_strings_and_refuses_them(server):
    before = server.log_path.read_text(errors="replace")

    response = httpx.get(f"{server.url}/api/v1/sessions/?{QUERY}", timeout=10)

    assert response.status_code == 401  # a key in the URL does not authenticate
    log = server.log_path.read_text(errors="replace")[len(before) :]
    assert "GET /api/v1/sessions/?api_key=[REDACTED]&token=[REDACTED]&password=[REDACTED]&key=[REDACTED]&page=2" in log
    for secret in SECRETS.values():
        assert secret not in log
