"""Agent API keys: made, looked up and revoked here.

A key looks like ``sy_<prefix>_<secret>``. The prefix is stored in clear for lookup
and display; the whole key is stored only as its sha256. Keys are 256-bit random
strings, so a fast hash is enough: there is nothing to brute-force.

``api_key_authenticate`` keeps what it found (the key row and its agent) in process memory
for at most ``settings.API_KEY_CACHE_SECONDS`` (2 s; capped at 2 s), keyed by the sha256 of the whole key, so a busy
agent does not cost a query per request. What that allows, and only for that long: a key
revoked, or an agent paused or edited, by *another* process (another web worker, a shell)
is still honoured, or seen as it was, by a process that looked the key up in the last 2 s.
In this process ``api_key_revoke`` and the admin's pause/activate actions empty the cache at
once (``api_key_cache_clear``); other changes to those rows are seen within the same 2 s.

Each lookup also counts as the agent's heartbeat (sessions_app/liveness.py), written at most
once per few seconds per agent: the cached agent carries the time last written.
"""

import copy
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.api.errors import DomainError
from sessions_app.liveness import agent_activity_record
from sessions_app.models import Agent, AgentApiKey

KEY_PREFIX = "sy_"
LAST_USED_RESOLUTION_SECONDS = 60
# How long a looked-up key (and its agent) is reused without asking the database is
# settings.API_KEY_CACHE_SECONDS (2 s, and never more: see above); 0 turns the cache off.
AUTH_CACHE_MAX_SECONDS = 2.0
AUTH_CACHE_MAX_ENTRIES = 10_000

# sha256 of the whole key -> (monotonic expiry, the key row with its agent). Plain dict
# operations are atomic under the GIL; entries are never handed out, only copies of them.
_auth_cache: dict[str, tuple[float, AgentApiKey]] = {}
# Bumped by every clear: a lookup that read the database before a clear must not cache what it read.
_auth_generation = [0]


def api_key_cache_clear() -> None:
    """Forget every cached key lookup in this process (after a revocation or a pause).

    It clears again when the current transaction commits, so a lookup made in between
    cannot keep the row as it was before the change.
    """
    _auth_generation[0] += 1
    _auth_cache.clear()
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(_clear_now)


def _clear_now() -> None:
    _auth_generation[0] += 1
    _auth_cache.clear()


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


def api_key_find(*, key: str) -> AgentApiKey | None:
    """The active key matching ``key``, with its agent, or None. Unlike ``api_key_authenticate`` it is
    not a use of the key (no last_used_at, no heartbeat, no cache): for checking a key kept in a file."""
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    prefix = key[len(KEY_PREFIX) :].split("_", 1)[0]
    entry = AgentApiKey.objects.select_related("agent").filter(prefix=prefix, revoked_at__isnull=True).first()
    if entry is None or not hmac.compare_digest(entry.key_hash, _hash(key)):
        return None
    return entry


def _copy(api_key: AgentApiKey) -> AgentApiKey:
    """A copy of a cached key and of its agent, so a request may change its own freely."""
    agent = copy.copy(api_key.agent)
    api_key = copy.copy(api_key)
    api_key.agent = agent
    return api_key


def api_key_authenticate(*, key: str) -> AgentApiKey | None:
    """The active key matching ``key``, with its agent loaded, or None.

    A key found valid is remembered for API_KEY_CACHE_SECONDS (2 s) in this process: a
    revocation or pause made elsewhere applies here within that time, one made in this
    process at once (see the module docstring).
    """
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    digest = _hash(key)
    clock = time.monotonic()
    cached = _auth_cache.get(digest)
    if cached is not None and cached[0] > clock:
        entry = cached[1]
    else:
        generation = _auth_generation[0]
        prefix = key[len(KEY_PREFIX) :].split("_", 1)[0]
        entry = AgentApiKey.objects.select_related("agent").filter(prefix=prefix, revoked_at__isnull=True).first()
        if entry is None or not hmac.compare_digest(entry.key_hash, digest):
            _auth_cache.pop(digest, None)
            return None
        if len(_auth_cache) >= AUTH_CACHE_MAX_ENTRIES:
            _auth_cache.clear()
        ttl = min(settings.API_KEY_CACHE_SECONDS, AUTH_CACHE_MAX_SECONDS)
        if ttl > 0 and generation == _auth_generation[0]:
            _auth_cache[digest] = (clock + ttl, entry)
    now = timezone.now()
    if entry.last_used_at is None or (now - entry.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
        # Written at most once a minute per key: a busy agent must not turn every read into a write.
        AgentApiKey.objects.filter(pk=entry.pk).update(last_used_at=now)
        entry.last_used_at = now
    # Every request of an agent is a heartbeat. Noted on the cached entry itself, so the other
    # requests of its cache window don't write it again (sessions_app/liveness.py).
    agent_activity_record(agent=entry.agent, now=now)
    return _copy(entry)


def api_key_revoke(*, api_key: AgentApiKey) -> bool:
    """Revoke the key; True if this call revoked it, False if it already was."""
    changed = AgentApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    api_key_cache_clear()  # refused by this process from now on; by others within API_KEY_CACHE_SECONDS
    return changed == 1
