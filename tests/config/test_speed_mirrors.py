"""The upstream code that config/speed/ mirrors is still the code it was written against.

Each module of config/speed/ re-implements or relies on the inside of a piece of Django, asgiref
or channels_redis (its docstring says which). An upgrade that changes that piece fails here,
naming the module to re-check, instead of changing behaviour in production unseen. After
re-checking (and adapting) the module, put the new hash and version here.
"""

import hashlib
import inspect
import pkgutil
from importlib.metadata import version

import pytest

# upstream code -> (sha256 of its source, the version it was written against, the module that mirrors it)
MIRRORED = {
    "django.core.handlers.asgi:ASGIHandler.__call__": (
        "f756809e9c9308dcccb78a301fccf09196e80cdc4745690f80384d09b69dd102",
        "Django 5.2.19",
        "config/speed/asgi_handler.py, config/speed/request_threads.py",
    ),
    "django.core.handlers.asgi:ASGIHandler.handle": (
        "98faeb5bef800331e6a8002fbc96b30e4122a23438ae45a047190a531ea11323",
        "Django 5.2.19",
        "config/speed/asgi_handler.py",
    ),
    "django.core.handlers.asgi:ASGIHandler.run_get_response": (
        "0234ea5fe09a577785a5f895752910cbb439f5e28ebb53bdd27247251c00e6ef",
        "Django 5.2.19",
        "config/speed/asgi_handler.py",
    ),
    "django.core.handlers.base:BaseHandler.load_middleware": (
        "a1fb7ee5f8586195da2174d1bbc2bbfc7ca19b9d26ea66412cb434f45bf6d467",
        "Django 5.2.19",
        "config/speed/asgi_handler.py",
    ),
    "django.core.handlers.base:BaseHandler.get_response_async": (
        "ad82c920df0cebbb52b1ebafe6ab8b5541f200c39fa954a148b01f60725b715b",
        "Django 5.2.19",
        "config/speed/asgi_handler.py",
    ),
    "django.core.handlers.base:BaseHandler.get_response": (
        "3d6a79b124c2cccb709071aa82e68030f0a172c3c4662b68351e6b8161b9a848",
        "Django 5.2.19",
        "config/speed/asgi_handler.py",
    ),
    "django.db.backends.postgresql.base:DatabaseWrapper.create_cursor": (
        "5309d92ffca3e8718d0054b64fcd32ce8fb9cb7f260b914e844d4efcda62f81a",
        "Django 5.2.19",
        "config/speed/prepared.py",
    ),
    "django.db.backends.postgresql.base:DatabaseWrapper.get_connection_params": (
        "c3b08b880d604ccb27ea586bcb37425de4c62e0fd4668adb3de445dff1a41835",
        "Django 5.2.19",
        "config/speed/prepared.py (prepare_threshold from OPTIONS, config/env.py)",
    ),
    "asgiref.sync:ThreadSensitiveContext": (
        "da8ec00f861b8bdf79b0d318c32d1c6b844b1fd68e18ff7a70e4cae0990047d6",
        "asgiref 3.13.0",
        "config/speed/request_threads.py",
    ),
    "channels_redis.core:RedisChannelLayer._group_key": (
        "7e89938e1cb20f266f205f67c0adc192635bfe82d40d1afa2f88051f2e80af9a",
        "channels_redis 4.3.0",
        "config/speed/group_members.py",
    ),
    "channels_redis.core:RedisChannelLayer.consistent_hash": (
        "ba115e0235516e212b7dc9d72cdda0083dcaf137d6c03a331bc6669524f7ad1e",
        "channels_redis 4.3.0",
        "config/speed/group_members.py",
    ),
    "channels_redis.core:RedisChannelLayer.group_add": (
        "85ed67999d94bb85624d31b42566da065b9ce113f25232f5ad41cb3c5d0d6b4c",
        "channels_redis 4.3.0",
        "config/speed/group_members.py",
    ),
    "channels_redis.core:RedisChannelLayer.group_send": (
        "c9623ea6ccfa73085599ef24a8e7c0a5b06ffae0cba6daef8a6a2d7e7a0dfc91",
        "channels_redis 4.3.0",
        "config/speed/group_members.py",
    ),
}


def _source_hash(name: str) -> str:
    return hashlib.sha256(inspect.getsource(pkgutil.resolve_name(name)).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(MIRRORED))
def test_the_mirrored_upstream_code_is_the_one_the_mirror_was_written_against(name):
    digest, written_against, mirror = MIRRORED[name]
    distribution = written_against.split()[0]
    assert _source_hash(name) == digest, (
        f"{name} changed since {written_against} (installed: {distribution} {version(distribution)}): "
        f"re-check {mirror} against the new code, adapt it or remove it, then put the new hash in {__file__}"
    )


def test_a_changed_upstream_function_changes_its_hash(monkeypatch):
    # given the mirrored handle replaced by other code (as an upgrade would)
    import django.core.handlers.asgi as django_asgi

    def handle(self, scope, receive, send):
        return None

    monkeypatch.setattr(django_asgi.ASGIHandler, "handle", handle)

    # then its hash no longer matches the pinned one
    assert (
        _source_hash("django.core.handlers.asgi:ASGIHandler.handle")
        != MIRRORED["django.core.handlers.asgi:ASGIHandler.handle"][0]
    )
