"""HTTP routes of live capture: the recording proxy, guard mode, ingest."""

urlpatterns: list = []
