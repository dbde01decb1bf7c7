"""Session pages for engineers (issue 5)."""

from django.shortcuts import render

from config.pages import ENGINEERING, page_for


@page_for(ENGINEERING)
def session_list(request):
    return render(request, "sessions/session_list.html", {})


@page_for(ENGINEERING)
def session_detail(request, session_id: str):
    return render(request, "sessions/session_detail.html", {})
