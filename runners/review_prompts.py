"""What the agents of a review are told (SPEC §10): the request for changes a continuing session gets,
the hand-over a fresh session of another provider gets, and the brief of a review run.

Each is a prompt, so data: the runner hands it to the agent on its standard input or after ``--``
(client runner/providers.py), never where it is read as an option. The diff and the task's text
inside them are the agent's or a person's words, quoted as they are.
"""

from board.models import Task
from runners.task_diff import TaskChange

REVIEW_DIFF_MAX = 60_000  # characters of the diff put in a review run's prompt; past that it fetches it


def follow_up_prompt(*, message: str, comments: list[dict]) -> str:
    """What the agent is told: the message, then each comment under its place."""
    parts = [message.strip()] if message.strip() else []
    if comments:
        lines = []
        for comment in comments:
            where = comment["path"] + (f":{comment['line']}" if comment.get("line") else "")
            lines.append(f"- {where}: {comment['body'].strip()}")
        parts.append("Review comments:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _task_text(task: Task) -> str:
    return f"{task.title}\n\n{task.description}".strip()


def handover_prompt(*, task: Task, branch: str, request: str) -> str:
    """A fresh session of another provider, on the branch earlier runs worked on: the task, where
    the work is, and what the reviewer asks."""
    return (
        f"{_task_text(task)}\n\n---\nEarlier runs worked on this task on the branch {branch or 'of this folder'}; "
        "their commits are in this folder's git history. A reviewer read the change and asks for this:\n\n"
        f"{request}"
    )


def review_prompt(*, task: Task, branch: str, base: str, change: TaskChange | None, focus: str) -> str:
    """A review run's brief: read the change, comment through the API, never commit or push."""
    api = f"$SWITCHYARD_URL/api/v1/tasks/{task.pk}"
    lines = [
        f"Review the change made for task #{task.pk}: {_task_text(task)}",
        "",
        "---",
        "You are a reviewer: read, do not change anything. Do not commit, push or edit files in this folder "
        "(a commit is refused and fails the run).",
        f"The change is the branch {branch} against {base}: `git diff {base}...HEAD` in this folder, or "
        f'`curl -sS "{api}/diff/?format=json" -H "Authorization: Bearer $SWITCHYARD_KEY"`.',
        "Leave each remark as a comment on the line it is about (the line's number on the branch; leave "
        '"line" out for the whole file), one request per comment:',
        f'curl -sS -X POST "{api}/comments/" -H "Authorization: Bearer $SWITCHYARD_KEY" '
        '-H \'Content-Type: application/json\' -d \'{"path": "<file>", "line": <n>, "body": "<remark>"}\'',
        "Then end with a one-paragraph verdict.",
    ]
    if focus.strip():
        lines += ["", "What the person asking wants looked at:", focus.strip()]
    if change is not None:
        if len(change.text) <= REVIEW_DIFF_MAX:
            lines += ["", "The diff:", "```diff", change.text.rstrip("\n"), "```"]
        else:
            lines += ["", f"The diff is {len(change.text)} characters: read it with git or the API."]
    return "\n".join(lines)
