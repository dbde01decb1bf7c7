"""An ``orchestrate`` key reads what the runs it queues produced (issue 25 §5): a run's session, its
log, events, tool calls, files (the run's patch among them) and resume packet, so a script can queue,
watch and review by API alone. Read only: writing to a run's session stays its run's key's. Plugged
into sessions_app's read grants (sessions_app/session_hooks.py), which sit below runners."""

from config.actors import Actor
from runners.models import Run
from sessions_app.session_hooks import session_read_grant_register


def run_session_readable(*, actor: Actor, session) -> bool:
    """An unbound key with the orchestrate scope, and a session that is a run's."""
    if actor.agent is None or actor.bound_session_id is not None or not actor.can_orchestrate:
        return False
    return Run.objects.filter(session_id=session.pk).exists()


def run_session_reads_register() -> None:
    session_read_grant_register(name="runs", grant=run_session_readable)
