"""`switchyard hook`: Claude Code's hook events recorded in Switchyard (main.py), planned (plan.py),
answered by a person (answer.py), spooled when the server is away (spool.py), over HTTP on
``_socket`` (wire.py) and JSON on ``_json`` (lean_json.py). Nothing else is imported here: the hook
is a new process for every event (p95 ≤ 50 ms)."""
