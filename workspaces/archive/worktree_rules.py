"""When a worktree's workspace may be archived, as far as apps above workspaces are concerned.

A worktree's own state (active, unheld, nobody queued, no open session on it) is workspaces'; whether
the work done in it is over is the board's (its tasks done long enough ago: board/retention.py).
board registers that condition from ``AppConfig.ready()`` (workspaces may not import board: the
layers in pyproject), the pattern of config/extension_points.py.
"""

from collections.abc import Callable
from datetime import datetime

from django.db.models import Q

from config.extension_points import Hooks

_rules = Hooks()


def worktree_retention_rule_register(*, name: str, rule: Callable[..., Q]) -> None:
    """``rule(cutoff=...)`` returns a condition on Worktree rows (``OuterRef`` to the worktree) that
    holds when its work ended before ``cutoff``. Registered by name: ``ready()`` may run more than once."""
    _rules.register(name=name, hook=rule)


def worktree_retention_conditions(*, cutoff: datetime) -> list[Q]:
    """Every registered condition for ``cutoff``; all must hold. None registered: no worktree is due."""
    return _rules.call_each(cutoff=cutoff)
