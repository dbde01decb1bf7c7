"""``overwrite: true`` on export replaces only a file this agent exported; staff may replace any."""

import pytest

from ledger.models import Event
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db


def _artifact(client, body: bytes) -> Artifact:
    session = client.post("/api/v1/sessions/", {}, format="json").json()
    response = client.put(
        f"/api/v1/sessions/{session['id']}/files/work_products/report.md", data=body, content_type="text/markdown"
    )
    assert response.status_code == 201
    return Artifact.objects.get(workspace__sessions__id=session["id"])


def _export(client, artifact, destination, **extra):
    return client.post(
        f"/api/v1/artifacts/{artifact.pk}/export/", {"destination": str(destination), **extra}, format="json"
    )


def _exports() -> int:
    return Event.objects.filter(name="artifact.exported").count()


def test_an_agent_cannot_overwrite_another_agents_export(agent_client, other_client, file_roots):
    # given a file another agent exported
    destination = file_roots["EXPORT_ROOT"] / "report.md"
    theirs = _artifact(other_client, b"their report")
    assert _export(other_client, theirs, destination).status_code == 201
    mine = _artifact(agent_client, b"my report")
    exports = _exports()

    # when this agent exports over it with overwrite
    response = _export(agent_client, mine, destination, overwrite=True)

    # then 409, and the file, its folder and the ledger are as they were
    assert response.status_code == 409
    assert response.json() == {
        "message": f"{destination} was not exported by you; overwrite replaces only a file you exported (or staff's)."
    }
    assert destination.read_bytes() == b"their report"
    assert sorted(p.name for p in destination.parent.iterdir()) == ["report.md"]
    assert _exports() == exports


def test_an_agent_cannot_overwrite_a_file_switchyard_never_wrote(agent_client, file_roots):
    destination = file_roots["EXPORT_ROOT"] / "notes.md"
    destination.write_bytes(b"a person's notes")
    mine = _artifact(agent_client, b"my report")

    response = _export(agent_client, mine, destination, overwrite=True)

    assert response.status_code == 409
    assert destination.read_bytes() == b"a person's notes"
    assert sorted(p.name for p in destination.parent.iterdir()) == ["notes.md"]
    assert _exports() == 0


def test_an_agent_overwrites_its_own_export(agent_client, other_client, file_roots):
    destination = file_roots["EXPORT_ROOT"] / "report.md"
    mine = _artifact(agent_client, b"draft")
    assert _export(agent_client, mine, destination).status_code == 201

    assert _export(agent_client, mine, destination, overwrite=True).status_code == 201
    assert destination.read_bytes() == b"draft"
    assert _exports() == 2


def test_staff_may_overwrite_any_file(staff_client, agent_client, other_client, file_roots):
    destination = file_roots["EXPORT_ROOT"] / "report.md"
    theirs = _artifact(other_client, b"their report")
    assert _export(other_client, theirs, destination).status_code == 201
    mine = _artifact(agent_client, b"my report")

    response = _export(staff_client, mine, destination, overwrite=True)

    assert response.status_code == 201
    assert destination.read_bytes() == b"my report"
