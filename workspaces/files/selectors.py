from django.db.models import Prefetch, Q, QuerySet

from config.actors import Actor
from config.api.errors import DomainError
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession
from workspaces.models import Artifact, ArtifactVersion, Workspace


def session_workspace(*, session: AgentSession) -> Workspace:
    if session.workspace_id is None:
        raise DomainError(f"Session {session.pk!r} has no workspace.", code="not_found")
    return session.workspace


def artifacts_in(*, workspace: Workspace) -> QuerySet[Artifact]:
    versions = Prefetch("versions", queryset=ArtifactVersion.objects.order_by("-number"))
    return Artifact.objects.filter(workspace=workspace).prefetch_related(versions).order_by("path", "id")


def artifact_get_for_actor(*, actor: Actor, artifact_id: int) -> Artifact:
    """The artifact, if the actor may read it: staff, any agent for the shared workspace,
    else the agent whose session owns the workspace."""
    artifact = Artifact.objects.select_related("workspace").filter(pk=artifact_id).first()
    if artifact is None:
        raise DomainError(f"Artifact {artifact_id} not found.", code="not_found")
    workspace = artifact.workspace
    if actor.is_staff or workspace.kind == Workspace.Kind.SHARED:
        return artifact
    sessions = AgentSession.objects.filter(workspace=workspace, agent=actor.agent)
    bound = actor.bound_session_id
    if bound is not None:
        # A per-run key reads only what its session (or a child of it) wrote.
        sessions = sessions.filter(Q(pk=bound) | Q(parent_id=bound))
    if actor.agent is not None and sessions.exists():
        return artifact
    raise DomainError(f"Artifact {artifact_id} belongs to another agent's workspace.", code="forbidden")


def tool_call_in_session(*, session: AgentSession, tool_call_id: int | None = None, client_id: str | None = None):
    queryset = ToolInvocation.objects.filter(session=session)
    call = (
        queryset.filter(pk=tool_call_id).first()
        if tool_call_id is not None
        else queryset.filter(client_id=client_id).first()
    )
    if call is None:
        raise DomainError("The tool call named for this upload is not in this session.", code="not_found")
    return call
