"""Priority-file and campaign imports from the browser (issue 5)."""

from django.shortcuts import render

from config.pages import BOARD, page_for


@page_for(BOARD)
def priorities(request):
    return render(request, "board/priorities.html", {})


@page_for(BOARD)
def campaigns(request):
    return render(request, "board/campaigns.html", {})
