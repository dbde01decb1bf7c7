"""The usage badge on board cards, registered with board's card extras (usage sits above board)."""

from board.card_extras import CardExtra, card_extra_register
from usage.pages.selectors import card_usage_annotations


def card_usage_register() -> None:
    card_extra_register(
        extra=CardExtra(name="usage", annotations=card_usage_annotations, template="usage/_card_usage.html")
    )
