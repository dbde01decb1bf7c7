"""A hook process waiting on a person, and the person answering from the session page: the pieces
the live tests of questions answered in the browser share (elicitations, the tool policy)."""

import json
import os
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest
from django.test import Client

from config.pages import ENGINEERS
from sessions_app.models import AgentSession
from tests.page_users import user_in


@pytest.fixture
def start_hook(tmp_path):
    """Start `switchyard hook` on a payload, as Claude Code does; returns the running process."""

    def start(payload: dict, *, url: str, key: str, timeout: float, **env_extra: str) -> subprocess.Popen:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "SWITCHYARD_URL": url,
            "SWITCHYARD_KEY": key,
            "SWITCHYARD_STATE_DIR": str(tmp_path / f"state-{key[-6:]}"),
            "SWITCHYARD_HOOK_BUDGET": "15",  # a loaded machine: 5 s ran out once, both suites on a slow hour
            "SWITCHYARD_PERMISSION_TIMEOUT": str(timeout),
            **env_extra,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "switchyard_client.cli", "hook"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        proc.stdin.write(json.dumps(payload))
        proc.stdin.close()
        proc.stdin = None  # communicate() would flush it
        return proc

    return start


def wait_until_waiting(session_id: str, proc: subprocess.Popen, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if AgentSession.objects.filter(pk=session_id, status=AgentSession.Status.WAITING_FOR_INPUT).exists():
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("the session never waited for input")


def signed_in_engineer() -> dict:
    """The cookies of an engineer's browser (made here, in the test's thread: no ORM in the other)."""
    person = Client()
    person.force_login(user_in(ENGINEERS, username="eng"))
    return {"sessionid": person.cookies["sessionid"].value}


def person_answers(base_url: str, session_id: str, cookies: dict, **form: str) -> httpx.Response:
    """A signed-in engineer sends the session page's answer form over HTTP, as a browser would."""
    with httpx.Client(base_url=base_url, cookies=cookies, timeout=20) as browser:
        page = browser.get(f"/sessions/{session_id}/")
        assert page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        question = re.search(r'name="question" value="([^"]*)"', page.text).group(1)  # the question it shows
        return browser.post(
            f"/sessions/{session_id}/answer/",
            data={"csrfmiddlewaretoken": token, "question": question, **form},
            headers={"Referer": f"{base_url}/sessions/{session_id}/"},
        )


def answer_in_thread(base_url: str, session_id: str, cookies: dict, **form: str) -> tuple[threading.Thread, dict]:
    """The person answers from another thread while the test waits on the hook."""
    answered: dict = {}
    person = threading.Thread(
        target=lambda: answered.update(response=person_answers(base_url, session_id, cookies, **form)), daemon=True
    )
    person.start()
    return person, answered


def hook_output(proc: subprocess.Popen, timeout: float = 60) -> tuple[dict | None, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return (json.loads(out) if out.strip() else None), err
