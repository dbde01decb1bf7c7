"""The page a person sees when django-axes refuses a login (settings: AXES_LOCKOUT_CALLABLE).

Axes' own answer is one line of plain text; this one matches the site and says when to try again.
The cool-off restarts with every refused try, so "N minutes from now" is exact when it is shown.
"""

import math

from axes.helpers import get_cool_off
from django.shortcuts import render

LOCKED_OUT_STATUS = 429


def lockout_response(request, original_response=None, credentials=None):
    cool_off = get_cool_off(request)
    minutes = math.ceil(cool_off.total_seconds() / 60) if cool_off else None
    context = {"minutes": minutes, "is_admin_login": request.path.startswith("/admin/")}
    return render(request, "registration/locked_out.html", context, status=LOCKED_OUT_STATUS)


def login_unlock(*, attempts) -> int:
    """Forget the failed attempts of the given (username, address) pairs: they may log in at once.

    Axes counts failures from these rows only, so deleting them is its own reset (axes.utils.reset
    does the same by username or address). Returns how many pairs were unlocked."""
    _, deleted = attempts.delete()
    return deleted.get("axes.AccessAttempt", 0)
