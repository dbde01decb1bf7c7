from pathlib import Path

import pytest

from ledger.models import Event
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db


@pytest.fixture
def artifact(agent_client):
    session = agent_client.post("/api/v1/sessions/", {}, format="json").json()
    agent_client.put(
        f"/api/v1/sessions/{session['id']}/files/work_products/report.md",
        data=b"# Findings",
        content_type="text/markdown",
    )
    return Artifact.objects.get()


def export(client, artifact, destination, **extra):
    return client.post(f"/api/v1/artifacts/{artifact.pk}/export/", {"destination": destination, **extra}, format="json")


def test_export_copies_the_file_and_records_it(agent_client, artifact, file_roots):
    destination = f"{file_roots['EXPORT_ROOT']}/reports/findings.md"

    response = export(agent_client, artifact, destination)

    assert response.status_code == 201
    assert Path(destination).read_bytes() == b"# Findings"
    assert response.json()["sha256"] == artifact.sha256
    assert Event.objects.filter(name="artifact.exported", subject_id=str(artifact.pk)).count() == 1
    assert [p.name for p in Path(destination).parent.iterdir()] == ["findings.md"]  # no temporary left


def test_export_never_overwrites_unless_asked(agent_client, artifact, file_roots):
    destination = file_roots["EXPORT_ROOT"] / "findings.md"
    assert export(agent_client, artifact, str(destination)).status_code == 201
    destination.write_bytes(b"keep me")  # the agent's own export, changed since

    refused = export(agent_client, artifact, str(destination))
    assert refused.status_code == 409
    assert destination.read_bytes() == b"keep me"

    # overwrite replaces a file this agent exported (see test_export_overwrite.py for others')
    allowed = export(agent_client, artifact, str(destination), overwrite=True)
    assert allowed.status_code == 201
    assert destination.read_bytes() == b"# Findings"
    assert sorted(p.name for p in destination.parent.iterdir()) == ["findings.md"]


@pytest.mark.parametrize(
    "destination",
    [
        "/etc/passwd",
        "relative/path.md",
        "{root}/../escape.md",
        "{root}/a/%2e%2e/b.md",
        "{root}X/sibling.md",
        "{root}/CON",
        "{root}/a\\b.md",
    ],
)
def test_destinations_outside_the_export_roots_are_refused(agent_client, artifact, file_roots, tmp_path, destination):
    destination = destination.format(root=file_roots["EXPORT_ROOT"])
    before = sorted(str(p) for p in tmp_path.rglob("*"))

    response = export(agent_client, artifact, destination)

    assert response.status_code == 400
    assert "Refused path" in response.json()["message"]
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert not Event.objects.filter(name="artifact.exported").exists()


def test_a_symlink_inside_the_export_root_is_not_followed(agent_client, artifact, file_roots, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (file_roots["EXPORT_ROOT"] / "link").symlink_to(outside)

    response = export(agent_client, artifact, f"{file_roots['EXPORT_ROOT']}/link/x.md")

    assert response.status_code == 400
    assert list(outside.iterdir()) == []


def test_another_agents_artifact_cannot_be_exported(other_client, artifact, file_roots):
    response = export(other_client, artifact, f"{file_roots['EXPORT_ROOT']}/x.md")

    assert response.status_code == 403
    assert list(file_roots["EXPORT_ROOT"].iterdir()) == []


def test_bad_input(agent_client, artifact):
    assert agent_client.post(f"/api/v1/artifacts/{artifact.pk}/export/", {}, format="json").status_code == 400
    assert export(agent_client, artifact, "/x", overwrite="yes").status_code == 400
    assert agent_client.post("/api/v1/artifacts/999/export/", {"destination": "/x"}, format="json").status_code == 404
