"""Sync-to-db: the agent-service's state snapshots and job logs mirrored into the database.

``state_sync`` is the service; ``board.tasks.state_sync_task`` runs it in a worker (beat,
the observer, the API and the admin queue it); ``board.sync.selectors`` reads issues and
drift. Decisions (see ``service`` for the run itself):

- A session folder ``session-1770537842`` becomes the AgentSession with that same id (it
  already matches the API's id rules and can't collide with generated ``session_<ts>_<uuid>``
  ids), owned by the agent ``orchestrator``, with ``metadata["source"] = "state_sync"``; a
  session with that id made through the API is left alone and reported.
- ``<agent>.json`` becomes the task ``task-<session id>-<agent>`` (so
  ``task-session-1770537842-backend``), assigned to the agent, which is created if unknown.
"""

from board.sync.service import SyncReport, state_sync, state_sync_queue

__all__ = ["SyncReport", "state_sync", "state_sync_queue"]
