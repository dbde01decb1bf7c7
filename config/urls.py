from django.contrib import admin
from django.urls import include, path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.api.converters import Int64Converter
from config.health import healthz
from config.pages import favicon

# Ids in paths: digits that fit a 64-bit column; anything else is a 404, never a 500.
register_converter(Int64Converter, "int64")

api_v1 = [
    path("", include("sessions_app.api.urls")),
    path("", include("composition.api.urls")),  # sessions/ (opening one names a board task), a session's resume
    path("", include("ledger.api.urls")),
    path("", include("board.api.urls")),
    path("", include("workspaces.api.urls")),
    path("", include("runners.api.urls")),
    path("", include("usage.api.urls")),
]

# The API first: the resolver tries patterns in order, and the agents' requests are most of the
# traffic; the pages' includes have no prefix, so every one of their patterns was tried first.
urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("composition.board_pages.urls")),
    path("", include("composition.pages.urls")),
    path("", include("workspaces.pages.urls")),
    path("", include("runners.pages.urls")),
    path("", include("usage.budget_urls")),  # the card panel's budget box
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]

handler404 = "config.api.handlers.not_found"
handler500 = "config.api.handlers.server_error"
