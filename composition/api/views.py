"""Session endpoints that read other apps: opening a session may name the board task it works on.
Thin, as sessions_app/api/views.py: validate, call one service, render."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response

from board.selectors import task_get
from config.api.errors import DomainError
from config.api.views import actor_from_request, validate_input
from sessions_app import selectors, services
from sessions_app.api import serializers as s
from sessions_app.api.filters import SessionFilter


class SessionListCreateView(ListAPIView):
    serializer_class = s.SessionOutput
    filterset_class = SessionFilter

    def get_queryset(self):
        return selectors.session_list_for_actor(actor=actor_from_request(self.request))

    @extend_schema(
        request=s.SessionCreateInput,
        responses={201: s.SessionOutput, 200: OpenApiResponse(s.SessionOutput, "Already open under this id (resume).")},
        summary="Open a session",
    )
    def post(self, request):
        actor = actor_from_request(request)
        data = validate_input(s.SessionCreateInput, request.data)
        if actor.agent is not None:
            if "agent" in data and data["agent"] != actor.agent.slug:
                raise DomainError("An agent opens sessions for itself only.", code="forbidden")
            agent = actor.agent
        elif "agent" in data:
            agent = selectors.agent_get_by_slug(slug=data["agent"])
        else:
            raise DomainError("Staff must name the agent to open a session for.", code="invalid")
        parent = None
        if data.get("parent"):
            parent = selectors.session_get_for_actor(actor=actor, session_id=data["parent"])
        task = None
        if data.get("task"):
            task = task_get(task_id=data["task"])
        session, created = services.session_open(
            actor=actor,
            agent=agent,
            session_id=data.get("id"),
            intent=data["intent"],
            labels=data["labels"],
            metadata=data["metadata"],
            repo=data["repo"],
            branch=data["branch"],
            pr_url=data["pr_url"],
            parent=parent,
            task=task,
            status=data["status"],
            workspace_kind=data["workspace"],
        )
        return Response(s.SessionOutput(session).data, status=201 if created else 200)
