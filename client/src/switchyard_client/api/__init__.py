"""The API client and what agents' commands share with it: ``Client`` (client.py) over httpx, with
retries (retry.py), errors (errors.py), the API's types (types.py), batching (batching.py), the
heartbeat thread (keepalive.py) and the CLI's current session (state.py). Nothing here imports the
rest of the package."""
