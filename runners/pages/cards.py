"""The run badge on board cards ("queued", or the runner a run is on), registered with board's card
extras: runners sits above board, so board shows a run without importing runners."""

from django.db.models import OuterRef, Subquery

from board.card_extras import CardExtra, card_extra_register
from runners.models import Run


def card_run_annotations() -> dict:
    """The task's active run, if any: subqueries in the board's one card query, each an index lookup
    (``run_one_active_per_task`` is a partial unique index)."""
    active = Run.objects.filter(task=OuterRef("pk"), status__in=Run.ACTIVE)
    return {
        "run_status": Subquery(active.values("status")[:1]),
        "run_runner": Subquery(active.values("runner__name")[:1]),
        # Why a queued run is queued again (handed to a runner that never acknowledged it), else "".
        "run_note": Subquery(active.filter(status=Run.Status.QUEUED).values("error")[:1]),
    }


def card_run_register() -> None:
    card_extra_register(
        extra=CardExtra(name="run", annotations=card_run_annotations, template="runners/_card_run.html", place="top")
    )
