"""The kanban board page (issue 5)."""

from django.shortcuts import render

from config.pages import BOARD, page_for


@page_for(BOARD)
def board(request):
    return render(request, "board/board.html", {})
