"""A session's resume (board/resume.py): it reads board, ledger and workspaces besides the session,
so its endpoint lives in the top layer, not in sessions_app's API below them. Thin, as
sessions_app/api/views.py: look the session up, call one selector, render."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from board.api.resume_serializers import ResumeOutput, resume_body
from board.resume import session_resume
from config.api.views import actor_from_request
from sessions_app import selectors


class SessionResumeView(APIView):
    @extend_schema(responses=ResumeOutput, summary="What a restarted agent needs to pick up where it stopped")
    def get(self, request, session_id: str):
        session = selectors.session_get_for_reader(actor=actor_from_request(request), session_id=session_id)
        return Response(resume_body(session_resume(session=session)))
