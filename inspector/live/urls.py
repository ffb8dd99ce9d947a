"""HTTP routes of live capture: the recording proxy and guard mode for every
dialect, attempt chains.  The upstream names come from INSPECTOR_UPSTREAMS."""

from django.urls import path, register_converter

from . import attempts, guard, proxy


class GeminiVersion:
    """`v1beta`, `v1`, `v1alpha`: the API version in a Gemini path."""

    regex = r"v1(?:beta|alpha)?"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class GeminiVerb(GeminiVersion):
    regex = r"streamGenerateContent|generateContent"


class ModelName(GeminiVersion):
    """A model id in a Gemini path (`gemini-2.5-flash`, `tunedModels/x` is not one)."""

    regex = r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}"


register_converter(GeminiVersion, "gemini_version")
register_converter(GeminiVerb, "gemini_verb")
register_converter(ModelName, "model")

GEMINI = "<gemini_version:version>/models/<model:model>:<gemini_verb:verb>"

urlpatterns = [
    path("proxy/<str:upstream>/v1/chat/completions", proxy.proxy_chat, name="proxy-chat"),
    path("proxy/<str:upstream>/v1/responses", proxy.proxy_responses, name="proxy-responses"),
    path("proxy/<str:upstream>/v1/messages", proxy.proxy_messages, name="proxy-messages"),
    path(f"proxy/<str:upstream>/{GEMINI}", proxy.proxy_gemini, name="proxy-gemini"),
    path("proxy/<str:upstream>/v1/<path:path>", proxy.proxy_other, name="proxy-other"),
    path("guard/<str:upstream>/v1/chat/completions", guard.guard_chat, name="guard-chat"),
    path("guard/<str:upstream>/v1/responses", guard.guard_responses, name="guard-responses"),
    path("guard/<str:upstream>/v1/messages", guard.guard_messages, name="guard-messages"),
    path(f"guard/<str:upstream>/{GEMINI}", guard.guard_gemini, name="guard-gemini"),
    path("api/attempts/<str:chain>", attempts.attempts_view, name="api-attempts"),
]
