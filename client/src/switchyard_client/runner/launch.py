"""How a run's agent starts (its argv template, its prompt and the provider's session it works in):

- fresh: the provider's ``command``, the run's prompt (with what an earlier attempt left, if any);
- a restart of this run (the runner died, its agent too): ``resume_command`` on the run's own agent
  session;
- a waiting run a person answered (deferral.py): ``resume_command`` on the session that deferred
  the call;
- a run of kind ``continue`` (SPEC §10, "request changes"): ``resume_command`` on the agent session
  of the run it continues (``resumes.agent_session``: Claude Code's ``--resume <id>``, Codex's
  ``exec resume <id>``) with the request as its prompt, when this runner ran that run (the session
  is on its disk) and the provider can resume; else a fresh session told of the task, where the
  work is, and the request.

The provider's own session id is what a later run continues: known before the spawn for a command
that sets it (Claude Code's ``--session-id {session_uuid}``), else from the agent's output (the
runner reads ``system/init``'s ``session_id``, Codex's ``thread.started`` ``thread_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from switchyard_client.runner.config import ProviderConfig
from switchyard_client.runner.providers import resume_prompt, session_uuid, template_fields
from switchyard_client.runner.state import RunState

# What a resumed deferred session is told, if anything: see deferral.py.
DEFERRED_PROMPT = ""


@dataclass
class Launch:
    resume: bool  # start the provider's resume_command (else its command)
    agent_session: str  # the provider's session it works in, '' until its output says
    prompt: str


def _resume_needs(provider: ProviderConfig) -> set[str]:
    return template_fields(provider.resume_command or []) & {"agent_session", "session_uuid"}


def own_agent_session(state: RunState, provider: ProviderConfig) -> str:
    """The provider's session of this run so far: as seen, else the one its command set."""
    if state.agent_session:
        return state.agent_session
    if state.session and "session_uuid" in template_fields(provider.command):
        return session_uuid(state.session)
    return ""


def launch_plan(
    state: RunState, provider: ProviderConfig, *, runner_name: str, restart: bool, packet: dict[str, Any] | None
) -> Launch:
    s, a = state, state.assignment
    prompt = str(a.get("prompt") or "")
    parked = a.get("deferred")
    if isinstance(parked, dict) and provider.resume_command and not restart:
        # A person answered the call its agent deferred: the same session goes on from that call
        # (the hook answers its PreToolUse with the decision: deferral.py).
        session = str(parked.get("agent_session") or "") or own_agent_session(s, provider)
        return Launch(resume=True, agent_session=session, prompt=DEFERRED_PROMPT)
    if restart and provider.resume_command:
        own = own_agent_session(s, provider)
        if own or not _resume_needs(provider):
            return Launch(resume=True, agent_session=own, prompt=resume_prompt(prompt, packet))
    if a.get("kind") == "continue":
        earlier = a.get("resumes") or {}
        theirs = str(earlier.get("agent_session") or "")
        here = earlier.get("runner") == runner_name and earlier.get("provider") == s.provider
        if here and provider.resume_command and (theirs or not _resume_needs(provider)):
            return Launch(resume=True, agent_session=theirs, prompt=prompt)
        return Launch(resume=False, agent_session="", prompt=takeover_prompt(a, prompt, packet))
    return Launch(resume=False, agent_session="", prompt=resume_prompt(prompt, packet))


def takeover_prompt(assignment: dict[str, Any], request: str, packet: dict[str, Any] | None) -> str:
    """A continue run that cannot resume the earlier session: the task, where its work is, the request."""
    task = assignment.get("task") or {}
    text = f"{task.get('title') or ''}\n\n{task.get('description') or ''}".strip()
    body = (
        f"{text}\n\n---\nAn earlier session worked on this task in this folder (its commits are in the git "
        "history); it cannot be resumed here, so you carry on from where it stopped. A reviewer read the change "
        f"and asks for this:\n\n{request}"
    )
    return resume_prompt(body, packet)
