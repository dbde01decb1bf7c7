from django.urls import path

from board.pages import board_views, import_views

app_name = "board"

urlpatterns = [
    path("", board_views.board, name="board"),
    path("priorities/", import_views.priorities, name="priorities"),
    path("campaigns/", import_views.campaigns, name="campaigns"),
    path("priorities/preview/", import_views.priorities_preview_partial, name="priorities_preview"),
    path("priorities/apply/", import_views.priorities_apply_view, name="priorities_apply"),
    path("campaigns/import/", import_views.campaigns_import_view, name="campaigns_import"),
]
