"""The live session page's websocket: an adapter from a session's live messages
(sessions_app/live.py, config/live.py) to out-of-band HTML rendered by the partials the page
itself uses. Each frame starts with ``<!--live:N-->``, the message's number on the session's
topic: the page (static/js/live.js) refetches what it shows when one is missing."""

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from composition.page_selectors import session_live_push
from config.live import LiveConsumer
from config.pages import ENGINEERING, user_may
from sessions_app.live import session_group
from sessions_app.models import AgentSession


@database_sync_to_async
def _may_follow(user, session_id: str) -> bool:
    # Anonymous people, people outside the engineers, and unknown sessions never join a group.
    if user is None or not user.is_authenticated or not user_may(user, ENGINEERING):
        return False
    return AgentSession.objects.filter(pk=session_id).exists()


def _render_sync(message: dict) -> str:
    session_id = message["session_id"]
    push = session_live_push(session_id=session_id, message=message)
    html = render_to_string("sessions/_live_push.html", {"push": push, "session_id": session_id})
    # Sent even when empty: the page counts every number.
    return f"<!--live:{message['seq']}-->" + (html if html.strip() else "")


# Not thread-sensitive: a render must not queue behind the HTTP views on the one shared thread.
_render = database_sync_to_async(_render_sync, thread_sensitive=False)


async def render(message: dict) -> str:
    return await _render(message)


class SessionConsumer(LiveConsumer):
    hello = False  # the page carries its number (data-live-seq); a reconnect refetches
    live_render = staticmethod(render)

    async def live_topic(self) -> str | None:
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        if not await _may_follow(self.scope.get("user"), session_id):
            return None
        return session_group(session_id)
