"""Pages: the capture list, upload form, capture page and frame permalinks."""

urlpatterns: list = []
