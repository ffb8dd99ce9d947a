from django.http import HttpRequest, HttpResponse


def health(request: HttpRequest) -> HttpResponse:
    """Liveness probe used by tests and process supervisors."""
    return HttpResponse("ok", content_type="text/plain")
