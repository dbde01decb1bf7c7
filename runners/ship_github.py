"""GitHub's REST API for pull requests, with httpx: open one, find the one already open for a
branch, read its state. Every failure is a DomainError (409) whose message says what GitHub said
and what to do; the token never appears in one (nor in a log: httpx logs no headers)."""

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from config.api.errors import DomainError

if TYPE_CHECKING:
    # Imported where GitHub is called: the admin loads this module in every Django process.
    import httpx

TIMEOUT_SECONDS = 15
API_VERSION = "2022-11-28"
_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
# https://github.com/o/r(.git), git@github.com:o/r(.git), ssh://git@github.com/o/r(.git)
_GITHUB_URL = re.compile(
    r"^(?:https://(?:[^@/]+@)?github\.com/|git@github\.com:|ssh://git@github\.com/)([^/]+/[^/]+?)(?:\.git)?/?$"
)


@dataclass(frozen=True)
class PullRequestState:
    number: int
    url: str
    state: str  # open, merged, closed


def github_repo_from_url(url: str) -> str:
    """owner/name of a github.com remote URL, or ''."""
    found = _GITHUB_URL.match(url.strip())
    return found.group(1) if found and _REPO.fullmatch(found.group(1)) else ""


def github_repo_check(value: str) -> str:
    if not _REPO.fullmatch(value) or ".." in value:
        raise DomainError(f"{value!r} is not a GitHub owner/name.", extra={"errors": {"github_repo": ["owner/name."]}})
    return value


def _client(token: str) -> "httpx.Client":
    import httpx

    return httpx.Client(
        base_url=settings.GITHUB_API_URL,
        timeout=TIMEOUT_SECONDS,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "switchyard",
        },
        transport=httpx.HTTPTransport(retries=2),  # connection failures only: never a request sent twice
    )


def _state(body: dict) -> PullRequestState:
    state = "merged" if body.get("merged_at") else body.get("state", "open")
    return PullRequestState(number=int(body["number"]), url=str(body["html_url"]), state=state)


def _refusal(response: "httpx.Response", doing: str) -> DomainError:
    try:
        said = str(response.json().get("message", ""))[:300]
    except ValueError:
        said = response.text[:300]
    remaining = response.headers.get("x-ratelimit-remaining")
    if response.status_code == 429 or (response.status_code == 403 and remaining == "0"):
        reset = response.headers.get("x-ratelimit-reset") or ""
        retry = response.headers.get("retry-after") or ""
        return DomainError(
            f"GitHub's rate limit was reached while {doing}; try again later"
            + (f" (in {retry} s)." if retry else f" (it resets at {reset})." if reset else "."),
            code="conflict",
            extra={"github": "rate_limited", "github_status": response.status_code},
        )
    if response.status_code == 401:
        return DomainError(
            f"GitHub refused the repository's token while {doing} (401 {said or 'Bad credentials'}); "
            "set a valid token in the repository's shipping settings.",
            code="conflict",
            extra={"github": "bad_token", "github_status": 401},
        )
    return DomainError(
        f"GitHub answered {response.status_code} while {doing}: {said or 'no message'}.",
        code="conflict",
        extra={"github": "refused", "github_status": response.status_code},
    )


def _call(token: str, method: str, path: str, doing: str, **kwargs) -> "httpx.Response":
    import httpx

    try:
        with _client(token) as client:
            return client.request(method, path, **kwargs)
    except httpx.HTTPError as error:
        raise DomainError(
            f"GitHub could not be reached while {doing} ({type(error).__name__}); try again later.",
            code="conflict",
            extra={"github": "unreachable"},
        ) from None


def github_pull_request_open(
    *, token: str, repo: str, head: str, base: str, title: str, body: str
) -> tuple[PullRequestState, bool]:
    """Open a pull request of ``head`` into ``base``; (its state, True) when opened now, (the one
    already open for ``head``, False) when GitHub says one exists (its 422)."""
    doing = f"opening a pull request of {head} on {repo}"
    response = _call(
        token, "POST", f"/repos/{repo}/pulls", doing, json={"title": title, "head": head, "base": base, "body": body}
    )
    if response.status_code == 201:
        return _state(response.json()), True
    if response.status_code == 422 and "already exists" in response.text:
        owner = repo.split("/")[0]
        listed = _call(token, "GET", f"/repos/{repo}/pulls", doing, params={"head": f"{owner}:{head}", "state": "all"})
        if listed.status_code == 200 and listed.json():
            return _state(listed.json()[0]), False
        raise DomainError(
            f"GitHub says a pull request of {head} already exists on {repo}, but does not list it.",
            code="conflict",
            extra={"github": "exists"},
        )
    raise _refusal(response, doing)


def github_pull_request_state(*, token: str, repo: str, number: int) -> PullRequestState:
    doing = f"reading pull request #{number} of {repo}"
    response = _call(token, "GET", f"/repos/{repo}/pulls/{number}", doing)
    if response.status_code != 200:
        raise _refusal(response, doing)
    return _state(response.json())
