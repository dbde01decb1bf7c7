"""Python client, `switchyard` CLI and Claude Code hooks adapter for the Switchyard API.

    from switchyard_client import Client, EventBatcher
    with Client() as sy:                      # SWITCHYARD_URL, SWITCHYARD_KEY
        session = sy.session_open(intent="Fix the login bug")
        with EventBatcher(sy, session["id"]) as batch:
            batch.event("log", {"line": "compiling"})

Names are loaded on first use: ``switchyard hook`` imports this package and must not pay for httpx.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook milliseconds
if TYPE_CHECKING:
    from switchyard_client.api.batching import EventBatcher
    from switchyard_client.api.client import Client
    from switchyard_client.api.errors import SwitchyardError
    from switchyard_client.api.retry import RetryPolicy

__all__ = ["Client", "EventBatcher", "RetryPolicy", "SwitchyardError"]

_WHERE = {
    "Client": "switchyard_client.api.client",
    "EventBatcher": "switchyard_client.api.batching",
    "RetryPolicy": "switchyard_client.api.retry",
    "SwitchyardError": "switchyard_client.api.errors",
}


def __getattr__(name: str) -> object:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(name)
