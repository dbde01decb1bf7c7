from django.urls import path

from workspaces.api import views

urlpatterns = [
    path("sessions/<str:session_id>/files/", views.SessionFilesView.as_view(), name="session-files"),
    path("sessions/<str:session_id>/files/<path:path>", views.SessionFileView.as_view(), name="session-file"),
    path("artifacts/<int64:artifact_id>/export/", views.ArtifactExportView.as_view(), name="artifact-export"),
]
