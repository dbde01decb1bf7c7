"""Agent API keys in the admin: made by api_key_create, shown once, revoked by the service."""

import hashlib
import re

import pytest
from django.contrib.admin.models import LogEntry

from sessions_app.keys import api_key_authenticate, api_key_create, api_key_revoke
from sessions_app.models import AgentApiKey
from tests.admin.factories import admin_url

KEY_RE = re.compile(r"sy_[0-9a-f]{8}_[A-Za-z0-9_-]+")
pytestmark = pytest.mark.django_db


def test_add_form_asks_only_for_agent_name_and_scopes(admin_client):
    page = admin_client.get(admin_url(AgentApiKey, "add")).content.decode()

    assert 'name="agent"' in page
    assert 'name="name"' in page
    assert page.count('name="scopes"') == len(AgentApiKey.Scope.choices)
    assert 'name="key_hash"' not in page
    assert 'name="prefix"' not in page


def test_adding_a_key_shows_it_once_and_stores_only_its_hash(admin_client, agent):
    # when
    response = admin_client.post(
        admin_url(AgentApiKey, "add"),
        {"agent": agent.pk, "name": "ci runner", "scopes": ["agent", "orchestrate"]},
        follow=True,
    )

    # then the next page shows the key exactly once, in one message
    assert response.status_code == 200
    page = response.content.decode()
    shown = KEY_RE.findall(page)
    assert len(shown) == 1
    key = shown[0]
    assert sum(str(m.message).count(key) for m in response.context["messages"]) == 1
    # and the row holds its hash, prefix, name and scopes, never the key
    api_key = AgentApiKey.objects.get()
    assert api_key.agent == agent
    assert api_key.name == "ci runner"
    assert api_key.scopes == ["agent", "orchestrate"]
    assert api_key.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key.startswith(f"sy_{api_key.prefix}_")
    assert api_key_authenticate(key=key) == api_key
    assert key not in str(list(LogEntry.objects.values()))
    # and no later page shows it again
    for url in (admin_url(AgentApiKey, "changelist"), admin_url(AgentApiKey, "change", api_key.pk)):
        later = admin_client.get(url).content.decode()
        assert key not in later
        assert api_key.prefix in later


def test_a_typed_hash_or_prefix_is_ignored(admin_client, agent):
    admin_client.post(
        admin_url(AgentApiKey, "add"),
        {"agent": agent.pk, "name": "x", "scopes": ["agent"], "key_hash": "0" * 64, "prefix": "deadbeef"},
    )

    api_key = AgentApiKey.objects.get()
    assert api_key.key_hash != "0" * 64
    assert api_key.prefix != "deadbeef"


def test_add_without_a_scope_is_refused_and_makes_nothing(admin_client, agent):
    response = admin_client.post(admin_url(AgentApiKey, "add"), {"agent": agent.pk, "name": "x"})

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"scopes": ["This field is required."]}
    assert AgentApiKey.objects.count() == 0


def test_change_form_edits_the_name_only(admin_client, agent):
    # given
    api_key = api_key_create(agent=agent, name="old", scopes=["agent"]).api_key
    before = AgentApiKey.objects.values().get(pk=api_key.pk)

    # when
    response = admin_client.post(
        admin_url(AgentApiKey, "change", api_key.pk),
        {"name": "new", "scopes": '["orchestrate"]', "key_hash": "0" * 64, "prefix": "deadbeef", "revoked_at": ""},
    )

    # then
    assert response.status_code == 302
    after = AgentApiKey.objects.values().get(pk=api_key.pk)
    assert after["name"] == "new"
    assert {k: v for k, v in after.items() if k not in ("name", "updated_at")} == {
        k: v for k, v in before.items() if k not in ("name", "updated_at")
    }


def test_revoke_action_revokes_selected_active_keys_only(admin_client, agent):
    # given
    active = api_key_create(agent=agent).api_key
    already = api_key_create(agent=agent).api_key
    api_key_revoke(api_key=already)
    already_revoked_at = AgentApiKey.objects.get(pk=already.pk).revoked_at
    untouched = api_key_create(agent=agent).api_key

    # when
    response = admin_client.post(
        admin_url(AgentApiKey, "changelist"),
        {"action": "revoke_keys", "_selected_action": [active.pk, already.pk]},
        follow=True,
    )

    # then
    assert [m.message for m in response.context["messages"]] == ["1 key(s) revoked; 1 already revoked."]
    assert AgentApiKey.objects.get(pk=active.pk).revoked_at is not None
    assert AgentApiKey.objects.get(pk=already.pk).revoked_at == already_revoked_at
    assert AgentApiKey.objects.get(pk=untouched.pk).revoked_at is None
