from django.urls import path

from board.pages import board_views, import_views

app_name = "board"

urlpatterns = [
    path("", board_views.board, name="board"),
    path("priorities/", import_views.priorities, name="priorities"),
    path("campaigns/", import_views.campaigns, name="campaigns"),
]
