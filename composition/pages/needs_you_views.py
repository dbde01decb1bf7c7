"""The top bar's "Needs you" count (composition/needs_you.py), fetched by every page after it loads
and again when a live page receives a push: the pages themselves stay at their query counts."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from composition.needs_you import needs_you


@login_required
@never_cache
@require_GET
def needs_you_count(request):
    return render(request, "sessions/_needs_you.html", {"needs": needs_you(user=request.user)})
