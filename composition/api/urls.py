from django.urls import path

from composition.api import views

urlpatterns = [
    path("sessions/", views.SessionListCreateView.as_view(), name="session-list"),
]
