"""Websocket routes. The board and session consumers join here (issue 5)."""

websocket_urlpatterns: list = []
