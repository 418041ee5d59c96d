from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from frontend.views.account import limit_failed_logins

from .health import healthz

# The admin site's own sign-in takes the same passwords as the console's (a superuser's among
# them): it is held to the same failed-attempt limit, counted together with the console's. Set
# before ``admin.site.urls`` below builds the admin's URL patterns from it.
admin.site.login = limit_failed_logins(admin.site.login)

api_v1 = [
    path("", include("teams.urls")),
    path("", include("memory.urls")),
    path("", include("assets.urls")),
    path("", include("reflection.urls")),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links (the 403 page, the API docs, /admin/).
    path("favicon.ico", RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=False)),
    path("api/v1/", include(api_v1)),
    path("", include("proxy.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    path("", include("frontend.urls")),
]

handler404 = "nylon_project.errors.not_found"
handler500 = "nylon_project.errors.server_error"
handler400 = "nylon_project.errors.bad_request"
handler403 = "nylon_project.errors.permission_denied"
