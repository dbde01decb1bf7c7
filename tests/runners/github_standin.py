"""A local stand-in for GitHub's REST API (the pull request operations Switchyard calls), held to
GitHub's own OpenAPI description: npm ``@octokit/openapi``, installed pinned by .ci/run into
``.tools/octokit-openapi``. Every request it gets is checked against its operation (path, query,
body; with OpenAPI 3.0's ``nullable``: openapi-schema-validator's OAS30Validator), and so is every
answer it gives, built from the description's own examples. Tests assert ``problems`` is empty.

Tests needing it call ``require_octokit()``: a skip when it is not installed, a failure where
``REQUIRE_OCTOKIT_OPENAPI=1`` (CI).
"""

from __future__ import annotations

import copy
import json
import os
import threading
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from openapi_schema_validator import OAS30Validator

from tests.worker import ROOT

OCTOKIT_OPENAPI_VERSION = "23.0.2"  # the version .ci/run installs
DESCRIPTION = (
    ROOT / ".tools" / "octokit-openapi" / "node_modules" / "@octokit" / "openapi" / "generated"
) / "api.github.com.deref.json"
PULLS = "/repos/{owner}/{repo}/pulls"
PULL = "/repos/{owner}/{repo}/pulls/{pull_number}"


def require_octokit() -> Path:
    if not DESCRIPTION.is_file():
        message = (
            "GitHub's OpenAPI description is not installed (npm install --prefix .tools/octokit-openapi "
            f"@octokit/openapi@{OCTOKIT_OPENAPI_VERSION}, as .ci/run does)"
        )
        if os.environ.get("REQUIRE_OCTOKIT_OPENAPI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return DESCRIPTION


@cache
def _operations() -> dict:
    paths = json.loads(require_octokit().read_text())["paths"]
    return {(m, p): paths[p][m] for p in (PULLS, PULL) for m in ("get", "post") if m in paths[p]}


def _template(path: str) -> tuple[str, dict]:
    parts = path.strip("/").split("/")
    if len(parts) == 4 and parts[0] == "repos" and parts[3] == "pulls":
        return PULLS, {"owner": parts[1], "repo": parts[2]}
    if len(parts) == 5 and parts[0] == "repos" and parts[3] == "pulls":
        return PULL, {"owner": parts[1], "repo": parts[2], "pull_number": parts[4]}
    return "", {}


def _check(schema: dict, value, where: str, problems: list[str]) -> None:
    for error in OAS30Validator(schema).iter_errors(value):
        problems.append(f"{where}: {error.message[:300]} at {list(error.absolute_path)}")


class GitHubStandIn:
    """Pull requests by (repo, head); ``mode`` scripts failures: ok, bad_token, rate_limited."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.requests: list[dict] = []
        self.pulls: dict[tuple[str, str], dict] = {}
        self.mode = "ok"
        self.token = "ghp_standin_token"
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GitHubStandIn:
        _operations()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def set_state(self, repo: str, number: int, state: str) -> None:
        for pull in self.pulls.values():
            if pull["number"] == number and pull["base"]["repo"]["full_name"] == repo:
                pull["state"] = "closed" if state in ("closed", "merged") else "open"
                pull["merged_at"] = "2026-01-01T00:00:00Z" if state == "merged" else None
                pull["merged"] = state == "merged"

    # --- one request ---------------------------------------------------------------------------

    def _answer(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict, dict]:
        split = urlsplit(raw_path)
        template, params = _template(split.path)
        operation = _operations().get((method, template))
        record = {
            "method": method.upper(),
            "path": split.path,
            "query": parse_qs(split.query),
            "headers": dict(headers),
        }
        self.requests.append(record)
        if operation is None:
            self.problems.append(f"{method.upper()} {split.path}: no such operation in GitHub's description")
            return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, {}
        self._check_request(operation, method, template, split, headers, body)
        if headers.get("Authorization") != f"Bearer {self.token}" or self.mode == "bad_token":
            return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}, {}
        if self.mode == "rate_limited":
            reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1893456000"}
            message = {
                "message": "API rate limit exceeded for user ID 1.",
                "documentation_url": "https://docs.github.com/rest",
            }
            return 403, message, reset
        repo = f"{params['owner']}/{params['repo']}"
        if method == "post":
            return self._create(operation, repo, json.loads(body))
        if template == PULLS:
            head = parse_qs(split.query).get("head", [""])[0].partition(":")[2]
            found = [p for (r, h), p in self.pulls.items() if r == repo and h == head]
            return 200, found, {}
        found = [p for (r, _), p in self.pulls.items() if r == repo and str(p["number"]) == params["pull_number"]]
        if not found:
            return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, {}
        return 200, found[0], {}

    def _create(self, operation: dict, repo: str, body: dict) -> tuple[int, dict, dict]:
        if (repo, body["head"]) in self.pulls:
            return (
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "code": "custom", "message": f"A pull request already exists for {repo.split('/')[0]}:{body['head']}."}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
                },
                {},
            )  # fmt: skip
        example = operation["responses"]["201"]["content"]["application/json"]["examples"]["default"]["value"]
        pull = copy.deepcopy(example)
        number = 1347 + len(self.pulls)
        # The description's own example lists a team without its required "type" (the validator caught
        # it): no reviewers were asked for here, so none are listed.
        pull.update(number=number, state="open", merged_at=None, title=body["title"], body=body.get("body"))
        pull.update(requested_teams=[], requested_reviewers=[])
        pull["html_url"] = f"https://github.com/{repo}/pull/{number}"
        pull["head"]["ref"], pull["base"]["ref"] = body["head"], body["base"]
        pull["base"]["repo"]["full_name"] = repo
        self.pulls[(repo, body["head"])] = pull
        return 201, pull, {}

    def _check_request(self, operation, method, template, split, headers, body) -> None:
        where = f"{method.upper()} {template} request"
        for name in ("Accept", "X-GitHub-Api-Version"):
            if not headers.get(name):
                self.problems.append(f"{where}: no {name} header")
        query = parse_qs(split.query)
        known = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}
        for name, values in query.items():
            if name not in known:
                self.problems.append(f"{where}: unknown query parameter {name!r}")
                continue
            value = values[0]
            if known[name]["schema"].get("type") == "integer" and value.isdigit():
                value = int(value)
            _check(known[name]["schema"], value, f"{where} ?{name}", self.problems)
        if "requestBody" in operation:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            try:
                _check(schema, json.loads(body or b"null"), where, self.problems)
            except ValueError:
                self.problems.append(f"{where}: the body is not JSON")

    def _check_response(self, method, path, status, answer) -> None:
        template, _ = _template(urlsplit(path).path)
        operation = _operations().get((method, template))
        if operation is None:
            return
        response = operation["responses"].get(str(status))
        where = f"{method.upper()} {template} answer {status}"
        if response is None:
            if status != 401:  # every GitHub operation may answer 401, which the description leaves out
                self.problems.append(f"{where}: not a status GitHub's description lists")
            return
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if schema is not None:
            _check(schema, answer, where, self.problems)

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, answer, extra = standin._answer(method, self.path, self.headers, body)
                standin._check_response(method, self.path, status, answer)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("get")

            def do_POST(self):
                self._serve("post")

            def log_message(self, *args) -> None:
                pass

        return Handler
