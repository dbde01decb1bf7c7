"""Agent API keys: made, looked up and revoked here.

A key looks like ``sy_<prefix>_<secret>``. The prefix is stored in clear for lookup
and display; the whole key is stored only as its sha256. Keys are 256-bit random
strings, so a fast hash is enough: there is nothing to brute-force.
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from config.api.errors import DomainError
from sessions_app.models import Agent, AgentApiKey

KEY_PREFIX = "sy_"
LAST_USED_RESOLUTION_SECONDS = 60


@dataclass(frozen=True)
class IssuedKey:
    key: str  # shown once, never stored
    api_key: AgentApiKey


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def agent_get_or_create(*, slug: str, display_name: str = "", provider: str = Agent.Provider.CUSTOM) -> Agent:
    agent, _ = Agent.objects.get_or_create(
        slug=slug, defaults={"display_name": display_name or slug, "provider": provider}
    )
    return agent


@transaction.atomic
def api_key_create(*, agent: Agent, name: str = "", scopes: list[str] | None = None) -> IssuedKey:
    scopes = scopes if scopes is not None else [AgentApiKey.Scope.AGENT]
    unknown = set(scopes) - set(AgentApiKey.Scope.values)
    if unknown:
        raise DomainError(f"Unknown scopes: {', '.join(sorted(unknown))}.")
    prefix = secrets.token_hex(4)
    key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    api_key = AgentApiKey.objects.create(agent=agent, name=name, prefix=prefix, key_hash=_hash(key), scopes=scopes)
    return IssuedKey(key=key, api_key=api_key)


def api_key_authenticate(*, key: str) -> AgentApiKey | None:
    """The active key matching ``key``, with its agent loaded, or None."""
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    prefix = key[len(KEY_PREFIX) :].split("_", 1)[0]
    api_key = AgentApiKey.objects.select_related("agent").filter(prefix=prefix, revoked_at__isnull=True).first()
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _hash(key)):
        return None
    now = timezone.now()
    if api_key.last_used_at is None or (now - api_key.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
        # Written at most once a minute per key: a busy agent must not turn every read into a write.
        AgentApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


def api_key_revoke(*, api_key: AgentApiKey) -> bool:
    """Revoke the key; True if this call revoked it, False if it already was."""
    changed = AgentApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    return changed == 1
