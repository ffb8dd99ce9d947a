"""HTTP routes of live capture: the recording proxy, guard mode, attempt groups."""

from django.urls import path

from . import attempts, guard, proxy

urlpatterns = [
    path("proxy/<str:upstream>/v1/chat/completions", proxy.proxy_chat, name="proxy-chat"),
    path("proxy/<str:upstream>/v1/<path:path>", proxy.proxy_other, name="proxy-other"),
    path("guard/<str:upstream>/v1/chat/completions", guard.guard_chat, name="guard-chat"),
    path("api/attempts/<str:group>", attempts.attempts_view, name="api-attempts"),
]
