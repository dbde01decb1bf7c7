from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import Agent, AgentApiKey

pytestmark = pytest.mark.django_db


def test_creates_the_agent_and_prints_the_key_alone_on_the_last_line(client):
    out, err = StringIO(), StringIO()

    call_command("create_agent_key", "gemini-3", stdout=out, stderr=err)

    key = out.getvalue().strip().splitlines()[-1]
    assert key.startswith("sy_")
    assert Agent.objects.filter(slug="gemini-3").count() == 1
    stored = AgentApiKey.objects.get()
    assert key not in (stored.key_hash, stored.prefix)
    assert client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {key}").json()["slug"] == "gemini-3"


def test_a_revoked_key_is_refused(client):
    out = StringIO()
    call_command("create_agent_key", "gemini-3", stdout=out, stderr=StringIO())
    key = out.getvalue().strip().splitlines()[-1]
    from sessions_app.keys import api_key_revoke

    api_key_revoke(api_key=AgentApiKey.objects.get())

    assert client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401


def test_bad_slug_is_a_clear_error():
    with pytest.raises(CommandError, match="slug"):
        call_command("create_agent_key", "no spaces allowed", stdout=StringIO(), stderr=StringIO())
