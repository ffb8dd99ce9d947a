"""The JSON API under /api/."""

urlpatterns: list = []
