"""How a run's agent starts (client runner/launch.py): fresh, a restart resuming its own session, or a
run continuing an earlier run's agent session (SPEC §10, request changes); and where the runner
learns the provider's session id (runner/logship.py)."""

from switchyard_client.runner.config import ProviderConfig, parse_config
from switchyard_client.runner.launch import launch_plan
from switchyard_client.runner.logship import agent_session_in, parse_lines
from switchyard_client.runner.providers import providers_for, render, session_uuid, template_values
from switchyard_client.runner.state import RunState

# The built-in codex's resume template (its command replaced so that it counts as installed here).
BUILTINS = providers_for(
    parse_config(
        {"runner": {"url": "http://x"}, "providers": {"codex": {"command": ["{python}", "--", "{prompt}"]}}},
        env={"SWITCHYARD_RUNNER_KEY": "k"},
    )
)
CODEX_RESUME = [
    "codex",
    "exec",
    "resume",
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    "--",
]
DEMO = ProviderConfig(name="demo", command=["{python}", "-m", "switchyard_client.demo_agent"])


def _claude() -> ProviderConfig:
    return ProviderConfig(
        name="claude",
        command=["claude", "-p", "--session-id", "{session_uuid}"],
        resume_command=["claude", "-p", "--resume", "{session_uuid}"],
        prompt_stdin=True,
    )


def _codex() -> ProviderConfig:
    return ProviderConfig(
        name="codex",
        command=["codex", "exec", "--json", "--", "{prompt}"],
        resume_command=[*CODEX_RESUME, "{agent_session}", "{prompt}"],
    )


def _state(provider: str, *, kind: str = "work", earlier: dict | None = None, **fields) -> RunState:
    assignment = {
        "prompt": "Add a summary.",
        "kind": kind,
        "task": {"id": 7, "title": "Write notes", "description": "Short."},
        "resumes": earlier,
    }
    return RunState(id=12, attempt=1, provider=provider, assignment=assignment, session="s-12", **fields)


def _argv(state: RunState, provider: ProviderConfig, plan) -> list[str]:
    values = template_values(
        prompt=plan.prompt,
        session_id=state.session,
        workdir="/w",
        run_id=state.id,
        task_id=7,
        agent_session=plan.agent_session,
        resuming=plan.resume,
    )
    return render(provider.resume_command if plan.resume else provider.command, values)


EARLIER = {"id": 11, "session": "s-11", "provider": "claude", "runner": "r", "workdir": "/w", "agent_session": "abc-1"}


def test_a_continue_run_on_the_runner_that_ran_the_earlier_one_resumes_its_claude_session():
    state, provider = _state("claude", kind="continue", earlier=EARLIER), _claude()

    plan = launch_plan(state, provider, runner_name="r", restart=False, packet={"milestones": [{"text": "x"}]})

    assert (plan.resume, plan.agent_session, plan.prompt) == (True, "abc-1", "Add a summary.")
    assert _argv(state, provider, plan) == ["claude", "-p", "--resume", "abc-1"]


def test_a_continue_run_resumes_a_codex_thread_by_id_with_the_prompt_after_the_double_dash():
    earlier = {**EARLIER, "provider": "codex", "agent_session": "0199-thread"}
    state, provider = _state("codex", kind="continue", earlier=earlier), _codex()

    plan = launch_plan(state, provider, runner_name="r", restart=False, packet=None)

    assert _argv(state, provider, plan) == [*CODEX_RESUME, "0199-thread", "Add a summary."]


def test_a_continue_run_elsewhere_or_unresumable_starts_fresh_told_of_the_task_and_the_request():
    cases = [
        (_state("claude", kind="continue", earlier=EARLIER), _claude(), "another-runner"),
        (
            _state("codex", kind="continue", earlier={**EARLIER, "provider": "codex", "agent_session": ""}),
            _codex(),
            "r",
        ),
        (_state("demo", kind="continue", earlier={**EARLIER, "provider": "demo"}), DEMO, "r"),
    ]
    for state, provider, runner in cases:
        plan = launch_plan(state, provider, runner_name=runner, restart=False, packet=None)

        assert not plan.resume, provider.name
        assert plan.prompt.startswith("Write notes\n\nShort.\n\n---\nAn earlier session worked on this task")
        assert plan.prompt.endswith("asks for this:\n\nAdd a summary.")
    fresh = launch_plan(cases[0][0], _claude(), runner_name="another-runner", restart=False, packet=None)
    assert _argv(cases[0][0], _claude(), fresh)[:4] == ["claude", "-p", "--session-id", session_uuid("s-12")]


def test_a_restart_resumes_the_session_the_run_was_working_in():
    continuing = _state("claude", kind="continue", earlier=EARLIER, agent_ran=True, agent_session="abc-1")
    own = _state("claude", agent_ran=True)

    resumed = launch_plan(continuing, _claude(), runner_name="r", restart=True, packet=None)
    first = launch_plan(own, _claude(), runner_name="r", restart=True, packet=None)

    assert _argv(continuing, _claude(), resumed) == ["claude", "-p", "--resume", "abc-1"]
    assert _argv(own, _claude(), first) == ["claude", "-p", "--resume", session_uuid("s-12")]


def test_the_provider_session_id_comes_from_claude_init_and_codex_thread_started():
    lines = (
        b'{"type":"system","subtype":"init","session_id":"5f1e-uuid","model":"m"}\n'
        b'{"type":"thread.started","thread_id":"0199-thread"}\n'
        b'{"type":"system","subtype":"init","session_id":"bad id; rm -rf"}\n'
    )
    events, _, _ = parse_lines(lines, start_line=0, provider="claude", hooks=True, run_id=1)

    assert agent_session_in(events[:1]) == "5f1e-uuid"
    assert agent_session_in(events) == "0199-thread"  # the last well-formed one; a malformed id is ignored


def test_the_builtin_codex_resume_template_resumes_by_id():
    assert BUILTINS["codex"].resume_command == [*CODEX_RESUME, "{agent_session}", "{prompt}"]
