"""The telemetry relay's forwarder: a thread that sends the spooled exports to Switchyard's OTLP
receiver, oldest first, and deletes each only once the server has answered it.

An export goes out with the run's current key when it came with one of this runner's run keys (a
resumed run's new attempt revokes the old key; the usage is the same run's), else with the header
it came with. Unreachable server, 408, 429, 502-504: the same export again after a backoff (0.25 s
doubling to 5 s), for as long as it takes. Another 5xx: five tries, then it is dropped. A 4xx is
final (a body the server will never take, a revoked key): dropped, with a line on the console. A
re-sent export the server had already stored adds nothing there (usage rows are idempotent).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from switchyard_client.api.client import Client
from switchyard_client.api.errors import ConnectionFailed, SwitchyardError
from switchyard_client.api.retry import NO_RETRY
from switchyard_client.runner.otlp_spool import OtlpSpool

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
BASE_DELAY = 0.25
MAX_DELAY = 5.0
SERVER_ERROR_TRIES = 5
REFRESH_EVERY = 0.25  # seconds between two looks at the spool's folder when it is empty


class Forwarder:
    def __init__(
        self,
        spool: OtlpSpool,
        *,
        api: Client,
        key_for_run: Callable[[int], str | None],
        say: Callable[[str], None],
        stop: threading.Event,
    ):
        self.spool, self.key_for_run, self.say, self.stop = spool, key_for_run, say, stop
        # The runner's connections (and its TLS set-up, loaded once): each export with its own key.
        self.api = api
        self.failures: dict[str, int] = {}

    def start(self) -> None:
        threading.Thread(target=self._loop, name="otlp-forward", daemon=True).start()

    def _loop(self) -> None:
        delay = BASE_DELAY
        while not self.stop.is_set():
            self.spool.refresh()  # what the relay's keeper wrote (another process)
            names = self.spool.names()
            if not names:
                self.spool.wait_any(REFRESH_EVERY)
                continue
            for name in names:
                if self.stop.is_set():
                    break
                try:
                    sent = self._send(name)
                except Exception as exc:  # a header httpx will not send, say: never a dead forwarder
                    if self.stop.is_set():
                        break  # the runner's client closed under it: kept for the next start
                    self.say(f"telemetry export dropped: {type(exc).__name__}: {exc}")
                    self._done(name)
                    continue
                if not sent:
                    self.stop.wait(delay)
                    delay = min(delay * 2, MAX_DELAY)
                    break
                delay = BASE_DELAY

    def _send(self, name: str) -> bool:
        """One export to the server: True when it is done with (taken, or dropped), False to try again."""
        export = self.spool.read(name)
        if export is None:
            return True
        authorization = self._authorization(export.run) or export.authorization
        headers = {"Content-Type": export.content_type}
        if export.content_encoding:
            headers["Content-Encoding"] = export.content_encoding
        agent = self.api.with_key(authorization.removeprefix("Bearer ").strip(), retry=NO_RETRY)
        try:
            agent.request("POST", f"otlp/v1/{export.signal}", content=export.body, headers=headers)
        except ConnectionFailed:
            return False  # unreachable, or no answer in time: it may have been stored, which a resend cannot double
        except SwitchyardError as exc:
            return self._refused(export, authorization, exc)
        self._done(name)
        return True

    def _refused(self, export, authorization: str, exc: SwitchyardError) -> bool:
        status = exc.status or 500
        if status in RETRY_STATUSES:
            return False
        if status in (401, 403) and export.run is not None:
            now = self._authorization(export.run)
            if now and now != authorization:
                return False  # the run's key changed meanwhile (a new attempt): again with the new one
        if status >= 500:
            self.failures[export.name] = self.failures.get(export.name, 0) + 1
            if self.failures[export.name] < SERVER_ERROR_TRIES:
                return False
        self.say(f"telemetry export ({export.signal}) dropped: Switchyard answered {status}: {str(exc)[:200]}")
        self._done(export.name)
        return True

    def _authorization(self, run: int | None) -> str:
        key = self.key_for_run(run) if run is not None else None
        return f"Bearer {key}" if key else ""

    def _done(self, name: str) -> None:
        self.failures.pop(name, None)
        self.spool.remove(name)
