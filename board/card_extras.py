"""What apps above board add to a card, without board importing them (the layers in pyproject).

An app registers, from its ``AppConfig.ready()``, the annotations it adds to the board's one card
query (``board_task_list``) and a template that shows them on the card face. The board stays one
query for any number of cards, and a card's stored rendering (``board/cards.py``) is keyed by the
annotated values too, so a changed figure re-renders the card.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CardExtra:
    name: str
    # Built per query: expressions on the task's row (subqueries on OuterRef("pk")), by attribute name.
    annotations: Callable[[], dict[str, Any]]
    # Included on the card face with ``task`` in its context; shows nothing when the values are None.
    template: str
    # Where on the card: "top" (the badge row, after the board's own badges) or "body" (below the
    # card's agent and campaign).
    place: str = "body"
    # What the annotations depend on besides the registry (e.g. today's date), if anything: the board
    # builds its card query once per thread and builds it again when this value changes.
    key: Callable[[], Any] | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.annotations())


_extras: dict[str, CardExtra] = {}
_fields: tuple[str, ...] = ()
_registrations = [0]


def card_extra_register(*, extra: CardExtra) -> None:
    """Add (or replace, by name: ``ready()`` may run more than once) what an app shows on cards."""
    global _fields
    _extras[extra.name] = extra
    _fields = tuple(name for item in _extras.values() for name in item.fields)
    _registrations[0] += 1


def card_extras_key() -> tuple:
    """Changes whenever the card query must be built again: an extra registered, or an extra's key moved."""
    return (_registrations[0], *(extra.key() if extra.key else None for extra in _extras.values()))


def card_extras() -> tuple[CardExtra, ...]:
    return tuple(_extras.values())


def card_extra_annotations() -> dict[str, Any]:
    return {name: value for extra in _extras.values() for name, value in extra.annotations().items()}


def card_extra_values(task) -> tuple:
    """The registered values a card shows (None on a task not read by ``board_task_list``)."""
    return tuple(getattr(task, name, None) for name in _fields)
