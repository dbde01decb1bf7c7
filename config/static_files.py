"""WhiteNoise's static files, streamed with an async iterator when the app runs under ASGI.

WhiteNoise answers with a ``FileResponse`` over a plain file, a synchronous iterator. Under ASGI
Django cannot stream that: it warns ("StreamingHttpResponse must consume synchronous iterators")
and reads the whole file into a list in a worker thread before the first byte goes out, once for
every static file a page loads. Here the same response gets an async iterator that reads the file
block by block in a worker thread; under WSGI and the test client it is left as WhiteNoise made it.
"""

import asyncio

from django.core.handlers.asgi import ASGIRequest
from whitenoise.middleware import WhiteNoiseMiddleware

# Our static files are tens of KB: one thread hop for most of them.
BLOCK_BYTES = 256 * 1024


async def aread_blocks(filelike, block_bytes: int = BLOCK_BYTES):
    """The file's bytes, each read in a worker thread. The response closes the file."""
    while block := await asyncio.to_thread(filelike.read, block_bytes):
        yield block


async def _nothing():
    return
    yield  # an async generator with no items: a 304 or a HEAD answer


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    @staticmethod
    def serve(static_file, request):
        response = WhiteNoiseMiddleware.serve(static_file, request)
        if isinstance(request, ASGIRequest):
            filelike = response.file_to_stream
            # The file's close() is already among the response's closers: assigning new content
            # keeps it there, so the file is closed when the server is done with the response.
            response.streaming_content = _nothing() if filelike is None else aread_blocks(filelike)
        return response
