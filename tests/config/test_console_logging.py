"""What the console shows for a refused request: one line, no traceback (config/log_filters.py)."""

import io
import logging

import pytest

from config.pages import PRODUCT_OWNERS
from tests.page_users import user_in


@pytest.fixture
def console(settings):
    """The console handler of settings.LOGGING, writing to a buffer; DEBUG on, as under `make run`."""
    settings.DEBUG = True
    handler = next(h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


@pytest.mark.django_db
def test_a_403_page_is_one_console_line_without_a_traceback(client, console, caplog):
    # given a product owner, who may not open the sessions page
    client.force_login(user_in(PRODUCT_OWNERS))

    # when they open it
    response = client.get("/sessions/")

    # then one line says so, with no traceback, on the console and in the record
    assert response.status_code == 403
    output = console.getvalue()
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if " django." in line]  # not the login's own lines
    assert [line.split(" ", 2)[-1] for line in lines] == [
        "WARNING django.request Forbidden (Permission denied): /sessions/"
    ]
    assert [(r.name, r.exc_info) for r in caplog.records if r.name.startswith("django")] == [("django.request", None)]


@pytest.mark.django_db
def test_a_5xx_keeps_its_traceback(console):
    # given a record of a server error, as Django logs it
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        logging.getLogger("django.request").error("Internal Server Error: /x", exc_info=exc, extra={"status_code": 500})

    # then the console shows the traceback
    assert "Traceback (most recent call last)" in console.getvalue()
    assert "RuntimeError: boom" in console.getvalue()
