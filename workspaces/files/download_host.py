"""An optional separate host for browser downloads of workspace files (``DOWNLOAD_HOST``).

The download headers (``download_headers``) already keep an agent's file from running as
script on Switchyard's origin. A separate host is the second wall, for production: with it
set, a person's browser never gets file bytes from the main host. The main host checks who
asks (the session page's link, or the files API under a login session), then answers 302 to a
link on the download host signed with ``SECRET_KEY`` and valid for ``LINK_TTL_SECONDS``. The
download host serves those links and nothing else (no page, no API, no login form), and needs
no cookie: whatever a file did there, it would find no session and no page of Switchyard's.

Agents' API downloads, made with a key rather than a browser session, are served directly by
the main host (with the same headers): there is no browser session for a file to ride on.
"""

from django.conf import settings
from django.core import signing
from django.http import HttpResponseNotFound, HttpResponseRedirect

from config.api.errors import DomainError
from workspaces.models import Workspace

SALT = "switchyard.workspaces.download-link"
LINK_TTL_SECONDS = 300  # long enough to follow the redirect and resume a download, no longer
LINK_PREFIX = "/downloads/"


def download_host_enabled() -> bool:
    return bool(settings.DOWNLOAD_HOST)


def download_redirect(request, *, workspace: Workspace, path: str) -> HttpResponseRedirect:
    """302 to a signed link for ``path`` (a logical path the caller has just opened) on the
    download host; ``request`` gives the scheme, so TLS stays TLS."""
    token = signing.dumps({"w": workspace.pk, "p": path}, salt=SALT, compress=True)
    return HttpResponseRedirect(f"{request.scheme}://{settings.DOWNLOAD_HOST}{LINK_PREFIX}{token}")


def download_link_read(*, token: str) -> tuple[Workspace, str]:
    """The workspace and logical path a signed link names; not_found when forged or expired."""
    try:
        data = signing.loads(token, salt=SALT, max_age=LINK_TTL_SECONDS)
    except signing.SignatureExpired:
        message = "This download link has expired; open the file again from Switchyard."
        raise DomainError(message, code="not_found") from None
    except signing.BadSignature:
        raise DomainError("No such download link.", code="not_found") from None
    workspace = Workspace.objects.filter(pk=data["w"]).first()
    if workspace is None:
        raise DomainError("That workspace is gone.", code="not_found")
    return workspace, data["p"]


class DownloadHostMiddleware:
    """With DOWNLOAD_HOST set: that host answers only signed links, and the main host none."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if settings.DOWNLOAD_HOST:
            on_download_host = request.get_host().lower() == settings.DOWNLOAD_HOST.lower()
            if on_download_host != request.path_info.startswith(LINK_PREFIX):
                return HttpResponseNotFound("Not found.", content_type="text/plain; charset=utf-8")
        return self.get_response(request)
