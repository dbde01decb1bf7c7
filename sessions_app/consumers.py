"""The live session page's websocket: an adapter from ``session.changed`` messages
(sessions_app/live.py) to out-of-band HTML rendered by the partials the page itself uses."""

from asgiref.sync import async_to_sync
from channels.generic.websocket import WebsocketConsumer
from django.template.loader import render_to_string

from config.pages import ENGINEERING, user_may
from sessions_app.live import session_group
from sessions_app.models import AgentSession
from sessions_app.page_selectors import session_live_push


class SessionConsumer(WebsocketConsumer):
    group: str | None = None

    def connect(self):
        user = self.scope.get("user")
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        # Closing before accept refuses the handshake (HTTP 403): anonymous people, people
        # outside the engineers, and unknown sessions never join a group.
        if user is None or not user.is_authenticated or not user_may(user, ENGINEERING):
            self.close()
            return
        if not AgentSession.objects.filter(pk=session_id).exists():
            self.close()
            return
        self.session_id = session_id
        self.group = session_group(session_id)
        async_to_sync(self.channel_layer.group_add)(self.group, self.channel_name)
        self.accept()

    def disconnect(self, code):
        if self.group is not None:
            async_to_sync(self.channel_layer.group_discard)(self.group, self.channel_name)

    def receive(self, text_data=None, bytes_data=None):
        pass  # the page only listens; replies go through the CSRF-protected form

    def session_changed(self, message: dict) -> None:
        push = session_live_push(session_id=self.session_id, message=message)
        html = render_to_string("sessions/_live_push.html", {"push": push, "session_id": self.session_id})
        if html.strip():
            self.send(text_data=html)
