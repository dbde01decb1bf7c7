"""The Content-Security-Policy of the HTML pages: images from this site (and data: URLs) only.

Pages show what agents wrote (task descriptions in markdown, session events): an image from another
site would be fetched by every browser that opens it, telling that site who read what and when (a
tracking pixel). The markdown filter drops such images already (board/templatetags/board_tags.py);
this header is the second wall, for whatever HTML a page may show them through. Only ``img-src``:
the pages' scripts and styles are unchanged. A response that sets its own policy (the sandboxed
file downloads) keeps it.
"""

PAGE_CSP = "img-src 'self' data:"


class PageCspMiddleware:
    # Sync only, as the rest of the chain (config/speed/asgi_handler.py builds it in sync mode).
    sync_capable = True
    async_capable = False

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = PAGE_CSP
        return response
