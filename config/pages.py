"""What the people-facing pages share: who may see which page, and the navigation.

Two groups (made by a migration in sessions_app): product owners see the board, imports and
campaigns; engineers see everything, the admin included. Superusers are engineers. A logged-in
person outside the page's groups gets a 403 page, never a blank one; someone not logged in goes
to the login page.
"""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static

PRODUCT_OWNERS = "product owners"
ENGINEERS = "engineers"

# Which groups may open which area of the pages.
BOARD = (PRODUCT_OWNERS, ENGINEERS)
ENGINEERING = (ENGINEERS,)


def user_groups(user) -> set[str]:
    """The page groups of ``user``, cached on the user object for the request."""
    if not user.is_authenticated:
        return set()
    cached = getattr(user, "_page_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        if user.is_superuser:
            cached |= {PRODUCT_OWNERS, ENGINEERS}
        user._page_groups = cached
    return cached


def user_may(user, groups: tuple[str, ...]) -> bool:
    return bool(user_groups(user) & set(groups))


def _in_words(names) -> str:
    return " and ".join(sorted(names)) or "no group"


def refusal_text(user, groups: tuple[str, ...]) -> str:
    """What a refused person needs to know: which group the page wants, which they are in."""
    wanted = " or ".join(groups)
    return (
        f"This page is for {_in_words(groups)}; you are in {_in_words(user_groups(user))}. "
        f"Ask an engineer to add you to the {wanted} group if you need it."
    )


def page_for(groups: tuple[str, ...]) -> Callable:
    """Decorate a page view: login required, then membership of one of ``groups`` (else 403)."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not user_may(request.user, groups):
                raise PermissionDenied(refusal_text(request.user, groups))
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorate


def nav(request) -> dict:
    """Context processor: the navigation links this person may follow."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_links": []}
    links = []
    if user_may(user, BOARD):
        links += [("board:board", "Board"), ("board:priorities", "Priorities"), ("board:campaigns", "Campaigns")]
    if user_may(user, ENGINEERING):
        links += [
            ("sessions:list", "Sessions"),
            ("sessions:agents", "Agents"),
            ("runners:list", "Runners"),
            ("workspaces:worktrees", "Worktrees"),
        ]
    elif user_may(user, BOARD):
        links.append(("runners:list", "Runners"))  # product owners see where their runs go
    return {"nav_links": links, "nav_is_engineer": user_may(user, ENGINEERING)}


def favicon(request):
    """Browsers ask for /favicon.ico whatever a page links (and before any page): the SVG in static."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))
