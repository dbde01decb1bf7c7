"""How an app lets the apps above it plug in without importing them (the layers in pyproject).

The app that owns the point keeps one of these at module level, with its own named functions around
it; an app above registers into it from ``AppConfig.ready()``. ``ready()`` may run more than once, so
registering replaces by name and never adds a second copy.

- ``Hooks``: any number of callables, all called at one point, in the order they were first
  registered (board/claim_gates.py, ledger/tool_use_gates.py, sessions_app/session_hooks.py,
  workspaces/archive/worktree_rules.py).
- ``Provider``: exactly one thing the owner cannot work without (config/domain_events.py, the session
  workspace in sessions_app/session_hooks.py); a missing one is an error naming the app to install,
  never a silently skipped step.
"""

from collections.abc import Callable, ItemsView, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Hooks:
    """Callables by name. A name registered again keeps its place and gets the new callable (a dict's
    order), so a second ``ready()`` changes neither what is called nor when."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[str, Callable] = {}

    def register(self, *, name: str, hook: Callable) -> None:
        self._by_name[name] = hook

    def __iter__(self) -> Iterator[Callable]:
        return iter(self._by_name.values())

    def items(self) -> ItemsView[str, Callable]:
        """(name, callable) in order, for an owner that reports answers by name."""
        return self._by_name.items()

    def call_each(self, **arguments: Any) -> list:
        """Call every hook with the same arguments, in order; their answers in that order. A hook that
        raises stops the ones after it."""
        return [hook(**arguments) for hook in self._by_name.values()]


class Provider(Generic[T]):
    """One registered thing; registering again replaces it."""

    __slots__ = ("_what", "_app", "_registered")

    def __init__(self, *, what: str, app: str) -> None:
        self._what = what  # what is missing, in the error: "domain event writer"
        self._app = app  # the app whose ready() registers it: "ledger"
        self._registered: T | None = None

    def register(self, thing: T) -> None:
        self._registered = thing

    def get(self) -> T:
        if self._registered is None:
            raise RuntimeError(f"No {self._what} is registered: the {self._app} app must be installed.")
        return self._registered
