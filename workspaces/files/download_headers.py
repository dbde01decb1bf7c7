"""How a workspace file is served to a browser: the one decision every download route uses.

Agents write the files, so a file is as hostile as its author wants. Served from Switchyard's
origin with a script-capable type (HTML, SVG, XHTML, XML, JavaScript), it would run as the
engineer who opened it. So:

- every download is ``nosniff`` (the browser keeps to the type we send) and sandboxed by its
  CSP (no script, no same-origin access, no subresources, even if a browser did render it);
- only a short list of passive types is shown inline: plain text, PNG/JPEG/GIF/WebP, PDF;
- everything else is an attachment served as ``application/octet-stream``. The type comes
  from the file name's extension on this list, never from the Content-Type the uploader sent
  (that header is not even stored), and an unknown or active type is never named at all.
"""

import os
from dataclasses import dataclass
from urllib.parse import quote

# Extension -> the type it is served as, inline. Anything not here is an attachment.
PASSIVE_TYPES = {
    ".txt": "text/plain; charset=utf-8",
    ".log": "text/plain; charset=utf-8",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}
OPAQUE_TYPE = "application/octet-stream"
SANDBOX_CSP = "sandbox; default-src 'none'"


@dataclass(frozen=True)
class DownloadHeaders:
    content_type: str
    headers: dict[str, str]


def download_headers(name: str) -> DownloadHeaders:
    """The Content-Type and the other headers to serve the file called ``name`` with."""
    base = name.rsplit("/", 1)[-1]
    passive = PASSIVE_TYPES.get(os.path.splitext(base)[1].lower())
    disposition = "inline" if passive else "attachment"
    return DownloadHeaders(
        content_type=passive or OPAQUE_TYPE,
        headers={
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": SANDBOX_CSP,
            # RFC 6266 with an RFC 5987 value: every byte outside unreserved ASCII is
            # percent-encoded, so no quote, semicolon or line break can end the header early.
            "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(base, safe='')}",
        },
    )


def download_headers_apply(response, name: str) -> None:
    """Set the download headers of ``name`` on a response made with ``content_type`` unset."""
    decided = download_headers(name)
    response["Content-Type"] = decided.content_type
    for header, value in decided.headers.items():
        response[header] = value
