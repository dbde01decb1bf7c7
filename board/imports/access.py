"""Who may run an import."""

from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, user_may


def import_authorise(*, actor: Actor, what: str) -> None:
    """Staff, an orchestrating agent key, Switchyard itself (commands), or a person the board pages admit.

    Product owners are not staff, yet SPEC §1 has them start priorities and campaigns from the
    pages; the API views still ask for staff or the 'orchestrate' scope before reading the body.
    """
    if actor.system or actor.can_orchestrate:
        return
    if actor.agent is None and actor.user is not None and user_may(actor.user, BOARD):
        return
    raise DomainError(
        f"{what} needs staff, a product owner or an agent key with the 'orchestrate' scope.", code="forbidden"
    )
