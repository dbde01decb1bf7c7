"""The run watch on a task's panel: the running attempt's conversation for product owners, its raw
log, tokens and cost, every attempt; refused to people outside the board's groups; everything the
agent wrote escaped."""

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from composition.run_watch.selectors import LOG_LATE_SECONDS
from config.actors import SYSTEM
from config.pages import PRODUCT_OWNERS
from runners.models import Run
from runners.services import run_queue, run_transition
from sessions_app.logs import session_log_parts
from sessions_app.models import StreamEvent
from tests.factories import SessionFactory, StreamEventFactory, TaskFactory, ToolCallFactory
from tests.page_users import user_in
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db

CLAUDE = (Path(__file__).parent / "fixtures" / "claude_stream.jsonl").read_bytes()
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def owner_client(client):
    client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    return client


def _running_run(person, runner, *, provider="claude", log: bytes = b"", task=None) -> Run:
    task = task or TaskFactory(title="Fix the login bug")
    run = run_queue(actor=person, task=task, provider=provider)
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.ASSIGNED, runner=runner)
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.STARTING)
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.RUNNING)
    run.session = SessionFactory()
    run.started_at = timezone.now()
    run.save()
    if log:
        _write_log(run, log)
    return run


def _write_log(run: Run, data: bytes) -> None:
    path = Path(settings.LOGS_ROOT).joinpath(*session_log_parts(session=run.session))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as fh:
        fh.write(data)


def _panel(client, task) -> str:
    response = client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


def test_an_owner_watches_a_running_claude_run_as_a_conversation(owner_client, person, runner):
    lines = CLAUDE.splitlines(keepends=True)
    run = _running_run(person, runner, log=b"".join(lines[:4]))  # a text, a tool use and its result

    html = _panel(owner_client, run.task)

    assert 'class="run-watch"' in html
    assert "<p>I&#x27;ll look at the workdir first.</p>" in html or "<p>I'll look at the workdir first.</p>" in html
    assert '<span class="tool-name">Bash</span> <code class="tool-head">ls</code>' in html
    assert "README.md" in html  # the folded output
    assert '"type":"assistant"' not in html  # not the raw JSON
    assert "121 tokens" in html  # message 1's usage so far (120 in, 1 out), counted once over its two lines
    assert f'hx-get="/tasks/{run.task.pk}/watch/" hx-trigger="every 2s, ' in html  # polled while it runs
    assert f'hx-get="/tasks/{run.task.pk}/runs/{run.pk}/log/"' in html  # the raw log, one click away


def test_the_watch_follows_the_log_as_it_grows(owner_client, person, runner):
    lines = CLAUDE.splitlines(keepends=True)
    run = _running_run(person, runner, log=b"".join(lines[:2]))
    before = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()
    assert "Bash" not in before

    _write_log(run, b"".join(lines[2:]))
    after = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    assert '<span class="tool-name">Write</span>' in after
    assert "Done: <strong>notes.txt</strong> is written." in after
    assert "600 tokens" in after and "$0.0043" in after  # the result line's totals


def test_a_permission_request_sits_before_the_tool_call_it_asked_about(owner_client, person, runner):
    run = _running_run(person, runner, log=CLAUDE)
    asked = {
        "hook": "PermissionRequest",
        "tool_name": "Write",
        "question": "Allow Write?",
        "choices": ["allow", "deny"],
    }
    asked["tool_input"] = {"file_path": "/tmp/e-cap/work/notes.txt", "content": "made by claude\n"}
    StreamEventFactory(session=run.session, seq=1, type=StreamEvent.Type.INPUT_REQUEST, payload=asked)
    StreamEventFactory(
        session=run.session,
        seq=2,
        type=StreamEvent.Type.INPUT_REQUEST,
        payload={"answer": "", "decision": "allow", "in_reply_to": 1, "answered_by": "olivia"},
    )
    StreamEventFactory(
        session=run.session, seq=3, type=StreamEvent.Type.INPUT_REQUEST, payload={"question": "<b>Ship?</b>"}
    )

    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    question = html.index("<blockquote>Allow Write?</blockquote>")
    assert (
        html.index('<span class="tool-name">Bash</span>')
        < question
        < html.index('<span class="tool-name">Write</span>')
    )
    assert "<strong>Answer:</strong> Allowed (by olivia)" in html
    assert html.index("<blockquote>&lt;b&gt;Ship?&lt;/b&gt;</blockquote>") > html.index("notes.txt</strong> is written")


def test_a_codex_run_reads_as_its_commands_file_changes_and_plan(owner_client, person, runner):
    codex = (Path(__file__).parent / "fixtures" / "codex_exec.jsonl").read_bytes()
    run = _running_run(person, runner, provider="codex", log=codex)
    run_transition(actor=SYSTEM, run=run, to=Run.Status.SUCCEEDED, exit_code=0)

    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    assert '<span class="tool-name">shell</span> <code class="tool-head">bash -lc ls</code>' in html
    assert '<span class="tool-name">edit files</span> <code class="tool-head">notes.txt</code>' in html
    assert "completed:</span>Write notes.txt</li>" in html
    assert "Wrote <strong>notes.txt</strong>." in html
    assert "24,885 tokens" in html and "Cost so far" not in html  # Codex says no cost
    assert "no token count" not in html


def test_a_long_run_shows_its_last_steps_and_says_the_start_is_left_out(owner_client, person, runner, monkeypatch):
    monkeypatch.setattr("composition.run_watch.conversation.ITEMS_MAX", 2)
    run = _running_run(person, runner, log=CLAUDE)

    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    assert html.count('<li class="tool ') + html.count('<li class="say">') == 2
    assert "Done: <strong>notes.txt</strong>" in html and "look at the workdir first" not in html
    assert "The start of a long run is left out here" in html


def test_usage_records_give_tokens_and_cost_when_there_are_some(owner_client, person, runner):
    run = _running_run(person, runner, log=CLAUDE)
    UsageRecord.objects.create(
        agent=run.session.agent,
        session=run.session,
        input_tokens=1000,
        output_tokens=234,
        cost_usd=Decimal("1.5"),
        occurred_at=timezone.now(),
        source=UsageRecord.Source.OTLP_LOG,
        idempotency_key="k1",
    )

    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    assert "1,234 tokens" in html and "$1.50" in html


def test_an_unchanged_watch_answers_204_and_a_change_redraws_it(owner_client, person, runner):
    run = _running_run(person, runner, log=CLAUDE)
    run_transition(actor=SYSTEM, run=run, to=Run.Status.SUCCEEDED, exit_code=0)
    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()
    digest = html.split("?digest=")[1].split('"')[0]

    assert owner_client.get(f"/tasks/{run.task.pk}/watch/?digest={digest}").status_code == 204

    run_queue(actor=person, task=run.task, provider="demo")
    again = owner_client.get(f"/tasks/{run.task.pk}/watch/?digest={digest}")
    assert again.status_code == 200 and "queued" in again.content.decode().lower()


def test_a_text_agent_is_read_from_its_events_and_the_ledger(owner_client, person, runner):
    run = _running_run(person, runner, provider="demo", log=b"[demo-agent] starting\n")
    session = run.session
    StreamEventFactory(session=session, seq=1, type=StreamEvent.Type.LOG, payload={"message": "Demo agent started"})
    ToolCallFactory(
        session=session,
        tool_name="Read",
        input_summary='{"file_path": "/srv/work"}',
        status="success",
        output_summary='{"entries": ["README.md"]}',
        finished_at=timezone.now(),
    )
    StreamEventFactory(
        session=session, seq=2, type=StreamEvent.Type.PLAN_UPDATE, payload={"plan": ["Read the task", "Write notes"]}
    )
    StreamEventFactory(
        session=session, seq=3, type=StreamEvent.Type.INPUT_REQUEST, payload={"question": "Which colour?"}
    )
    StreamEventFactory(
        session=session, seq=4, type=StreamEvent.Type.INPUT_REQUEST, payload={"answer": "Blue", "in_reply_to": 3}
    )

    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    assert "<p>Demo agent started</p>" in html
    assert '<span class="tool-name">Read</span> <code class="tool-head">/srv/work</code>' in html
    assert '&#9744;</span> <span class="visually-hidden">pending:</span>Read the task' in html
    assert "Which colour?" in html and "<strong>Answer:</strong> Blue" in html


def test_everything_the_agent_wrote_is_escaped(owner_client, person, runner):
    text = f"Look {HOSTILE} [click](javascript:alert(1)) ![pixel](https://tracker.example/p.gif)"
    log = (
        '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":%s},'
        '{"type":"tool_use","id":"t1","name":%s,"input":{"command":%s}}]}}\n'
        '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":%s}]}}\n'
    )
    import json

    dumps = json.dumps
    run = _running_run(
        person, runner, log=(log % (dumps(text), dumps(HOSTILE), dumps(HOSTILE), dumps(HOSTILE))).encode()
    )

    html = owner_client.get(f"/tasks/{run.task.pk}/watch/").content.decode()

    assert "<script>alert" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html  # the tool's name, input and output
    assert "javascript:" not in html
    assert "tracker.example" not in html  # no external image


def test_people_outside_the_board_groups_are_refused(client, person, runner):
    run = _running_run(person, runner, log=CLAUDE)
    client.force_login(user_in(username="mallory"))  # in no page group

    for path in (f"/tasks/{run.task.pk}/watch/", f"/tasks/{run.task.pk}/runs/{run.pk}/log/"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert b"README.md" not in response.content


def test_the_raw_log_opens_on_its_tail_then_follows_by_offset(owner_client, person, runner):
    run = _running_run(person, runner, provider="demo", log=b"[demo-agent] starting <b>now</b>\n")

    first = owner_client.get(f"/tasks/{run.task.pk}/runs/{run.pk}/log/").content.decode()
    assert "[demo-agent] starting &lt;b&gt;now&lt;/b&gt;" in first
    offset = first.split("?offset=")[1].split('"')[0]
    _write_log(run, b"[demo-agent] done\n")
    more = owner_client.get(f"/tasks/{run.task.pk}/runs/{run.pk}/log/?offset={offset}").content.decode()

    assert f'hx-swap-oob="beforeend:#raw-log-text-{run.pk}">[demo-agent] done' in more
    assert "starting" not in more


def test_the_raw_log_refuses_a_bad_offset_and_a_run_of_another_task(owner_client, person, runner):
    run = _running_run(person, runner, log=CLAUDE)
    other = TaskFactory()

    bad = owner_client.get(f"/tasks/{run.task.pk}/runs/{run.pk}/log/?offset=-3")
    assert bad.status_code == 400 and b"offset must be a byte offset" in bad.content
    assert owner_client.get(f"/tasks/{other.pk}/runs/{run.pk}/log/").status_code == 404


def test_every_attempt_is_listed_and_a_stop_does_not_say_no_session(owner_client, person, runner):
    first = _running_run(person, runner, log=CLAUDE)
    run_transition(actor=SYSTEM, run=first, to=Run.Status.FAILED, exit_code=1, error="exit 1")
    second = _running_run(person, runner, provider="demo", task=first.task)
    run_transition(actor=SYSTEM, run=second, to=Run.Status.CANCELLED)

    html = _panel(owner_client, first.task)

    attempts = html.split('<ol class="attempts"')[1].split("</ol>")[0]
    assert attempts.index(f"#{second.pk}") < attempts.index(f"#{first.pk}")  # newest first
    assert '<span class="badge status-cancelled">Cancelled</span>' in attempts
    assert '<span class="badge status-failed">Failed</span>' in attempts
    assert "600 tokens · $0.0043 · exit 1" in attempts  # the Claude attempt's own totals
    assert "No session works on this task." not in html
    assert "No session works on it now" in html


def _log_poller(client, run, offset: int) -> bool:
    html = client.get(f"/tasks/{run.task.pk}/runs/{run.pk}/log/?offset={offset}").content.decode()
    return f'id="raw-log-poll-{run.pk}"' in html and "hx-get=" in html


def test_the_raw_log_is_followed_a_while_after_the_run_ends_then_left(owner_client, person, runner):
    # The runner reports the end, then ships what the agent's children wrote after its last tick: a
    # watcher that stopped at the end missed the last lines (CI: "[demo-agent] done" never showed).
    run = _running_run(person, runner, provider="demo", log=b"[demo-agent] committed\n")
    size = len(b"[demo-agent] committed\n")
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.SUCCEEDED, exit_code=0)
    assert _log_poller(owner_client, run, size)  # just ended, everything read: still followed

    _write_log(run, b"[demo-agent] done\n")
    late = owner_client.get(f"/tasks/{run.task.pk}/runs/{run.pk}/log/?offset={size}").content.decode()
    assert "[demo-agent] done" in late

    Run.objects.filter(pk=run.pk).update(ended_at=timezone.now() - timedelta(seconds=LOG_LATE_SECONDS + 1))
    run.refresh_from_db()
    assert not _log_poller(owner_client, run, size + len(b"[demo-agent] done\n"))  # long over: left alone
