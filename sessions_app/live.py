"""Live session pages: the one entry point for pushes to open session pages.

Services call ``session_push`` once per write with what changed (a range of event seqs, tool
call ids, whether the status moved). The message carries ids only, never ORM objects; it is
published on the session's topic through the live-page mechanism (config/live.py): after
commit, under the topic's next number, so a page never shows a change that was rolled back,
spots one it missed, and the writer pays no database query for it. ``SessionConsumer`` loads
and renders what the message names (``composition/consumers.py``).
"""

import hashlib
from collections.abc import Sequence

from config.live import publish


def session_group(session_id: str) -> str:
    # Group names allow only ASCII letters, digits, '-', '_' and '.', under 100 characters;
    # session ids may hold ':', so the group is named by a digest of the id.
    return "session." + hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:40]


def session_push(
    *,
    session_id: str,
    seqs: tuple[int, int] | None = None,
    tool_calls_created: Sequence[int] = (),
    tool_calls_finished: Sequence[int] = (),
    status: bool = False,
) -> None:
    """After commit, tell the session's open pages what changed: events ``seqs`` (first, last),
    tool calls new or finished, and whether the status (header, reply box) must be redrawn."""
    publish(
        session_group(session_id),
        {
            "session_id": session_id,
            "seqs": list(seqs) if seqs else None,
            "tool_calls_created": list(tool_calls_created),
            "tool_calls_finished": list(tool_calls_finished),
            "status": status,
        },
    )
