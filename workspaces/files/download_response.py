"""The response that sends an open workspace file: whole or one HTTP Range (200, 206), with the
download headers of ``download_headers``; a range outside the file is a JSON 416."""

import os

from django.http import JsonResponse, StreamingHttpResponse

from workspaces.files.download_headers import SANDBOX_CSP, download_headers_apply
from workspaces.files.uploads import fd_range_content


def file_response(
    request, *, fd: int, size: int, name: str, range_header: str | None
) -> StreamingHttpResponse | JsonResponse:
    """Stream ``fd`` (closed when done) as the file ``name``; ``request`` is Django's, which says
    whether the response goes out under ASGI."""
    start, length, status = 0, size, 200
    if range_header:
        # Imported here, not at the top: importing werkzeug loads its development server and test
        # client too, and this module is part of every web process's start.
        from werkzeug.http import parse_range_header

        parsed = parse_range_header(range_header)
        window = parsed.range_for_length(size) if parsed is not None and len(parsed.ranges) == 1 else None
        if window is None:
            os.close(fd)
            # No byte of the file goes out: a JSON error like every other API refusal.
            response = JsonResponse({"message": f"Range not satisfiable: the file has {size} bytes."}, status=416)
            response["Content-Range"] = f"bytes */{size}"
            response["X-Content-Type-Options"] = "nosniff"
            response["Content-Security-Policy"] = SANDBOX_CSP
            return response
        start, stop = window
        length, status = stop - start, 206
    response = StreamingHttpResponse(fd_range_content(request, fd, start, length), status=status)
    download_headers_apply(response, name)
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
    return response
