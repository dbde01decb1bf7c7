"""A webhook receiver for tests: a real HTTP server on 127.0.0.1 in a thread.

It records every request (headers and raw body) and answers with the status the test chose
for that request's number; an answer can be held back until the test releases it, to catch
a sender mid-request.
"""

import hashlib
import hmac
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def signature_valid(self, secret: str) -> bool:
        """What a receiver does, written here without Switchyard's code."""
        timestamp = self.headers["x-switchyard-timestamp"]
        expected = hmac.new(secret.encode(), timestamp.encode() + b"." + self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(f"sha256={expected}", self.headers["x-switchyard-signature"])


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"ok"
    hold: threading.Event | None = None  # answer only once this is set


@dataclass
class Receiver:
    answers: list[Answer] = field(default_factory=list)  # by request number; the last one repeats
    received: list[Received] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    number = len(receiver.received)
                answer = receiver.answer_for(number)
                if answer.hold is not None:
                    answer.hold.wait(timeout=60)
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender died or gave up while we held the answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer_for(self, number: int) -> Answer:
        if not self.answers:
            return Answer()
        return self.answers[min(number, len(self.answers)) - 1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def stop(self) -> None:
        for answer in self.answers:
            if answer.hold is not None:
                answer.hold.set()
        self.server.shutdown()
        self.server.server_close()
