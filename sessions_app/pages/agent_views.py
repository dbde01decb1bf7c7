"""The agents page (issue 5)."""

from django.shortcuts import render

from config.pages import ENGINEERING, page_for


@page_for(ENGINEERING)
def agent_list(request):
    return render(request, "sessions/agent_list.html", {})
