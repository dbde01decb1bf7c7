class SyncChainMiddleware:
    """Keeps the whole middleware chain on one thread under ASGI.

    WhiteNoise is sync-only. With an async-capable middleware below it, Django switches
    between the event loop and a worker thread at every boundary, about a dozen hops per
    request. A sync-only middleware at the bottom makes every middleware above it run in
    sync mode, so a request crosses from async to sync once.

    config.asgi.SyncChainASGIHandler now builds the chain in sync mode anyway (and runs the
    view in the same hop); this stays for any server that uses Django's own ASGIHandler.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)
