"""Running code in racing threads, each with its own database connection."""

import threading

from django.db import connection


def run_together(work, arguments: list) -> list[BaseException]:
    """Run ``work(argument)`` in one thread per argument, started at once; return what they raised."""
    barrier = threading.Barrier(len(arguments))
    errors: list[BaseException] = []

    def run(argument):
        try:
            barrier.wait(timeout=30)
            work(argument)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=run, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a claimant hung"
    return errors
