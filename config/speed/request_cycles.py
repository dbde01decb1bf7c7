"""Unlink the objects of a finished request, so that reference counting frees them at once.

Mirrors how a request's objects point at each other in Django 5.2.19 and DRF 3.18.3: DRF's
``APIView.finalize_response`` (rest_framework/views.py) puts the view and DRF's request in the
response's ``renderer_context``; DRF's ``Request.__init__`` (rest_framework/request.py) puts
itself in its parser context; Django's request is held by the messages storage and django-htmx's
details it carries, and its ``resolver_match`` keeps the URL patterns tried. Left as they are,
each request leaves about a hundred objects that only the cyclic garbage collector frees, and its
passes (with the GIL held) stall every request in flight in the worker. Serves the API's p99.
Pinned by tests/config/test_request_cycles.py: a request leaves nothing for the collector, and
without this it does (an upgrade that adds a cycle fails there).

Called once the response is complete (closed, and for a streamed one also sent), when nothing
reads these objects any more: a middleware that keeps the request past that point (to report an
error later, say) finds it empty. A streamed response (a file download) leads to no DRF view, so
that view's own cycle is still left to the collector: one per download, off the hot paths.
"""


def break_request_cycles(request, response) -> None:
    context = getattr(response, "renderer_context", None)
    if context:
        for part in (context.get("view"), context.get("request")):
            if part is not None:
                part.__dict__.clear()
        response.renderer_context = None
    if request is not None:
        request.__dict__.clear()
