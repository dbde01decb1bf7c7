"""Websocket routes: the board's and the session pages' consumers (issue 5). The websocket
counterpart of config/urls.py, named by ``settings.WEBSOCKET_URLCONF`` as ROOT_URLCONF names that
one; here in the top layer because it wires consumers of several apps."""

from channels.security.websocket import WebsocketDenier
from django.urls import re_path

from board.consumers import BoardConsumer
from composition.consumers import SessionConsumer

websocket_urlpatterns: list = [
    re_path(r"^ws/board/$", BoardConsumer.as_asgi()),
    re_path(r"^ws/sessions/(?P<session_id>[A-Za-z0-9][A-Za-z0-9._:-]{0,127})/$", SessionConsumer.as_asgi()),
    # Any other path: the handshake is refused (403), as an unknown page is a 404; without this,
    # Channels' router raises and the server answers the handshake with a 500.
    re_path(r"", WebsocketDenier.as_asgi()),
]
