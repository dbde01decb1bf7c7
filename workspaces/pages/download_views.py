"""The download host's one page: a signed link to a workspace file (workspaces/files/download_host.py)."""

from django.http import Http404
from django.views.decorators.http import require_safe

from config.api.errors import DomainError
from workspaces.files.download_host import download_host_enabled, download_link_read
from workspaces.files.download_response import file_response
from workspaces.files.services import artifact_open


@require_safe
def signed_download(request, token: str):
    # No login here: the download host gets no cookie; the signature is the permission.
    if not download_host_enabled():
        raise Http404("Downloads are served by the main host.")
    try:
        workspace, path = download_link_read(token=token)
        fd, size, logical = artifact_open(workspace=workspace, path=path)
    except DomainError as error:
        raise Http404(error.message) from None
    return file_response(request, fd=fd, size=size, name=logical, range_header=request.headers.get("Range"))
