"""Pages: the capture list, upload form, capture page and frame permalinks."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.capture_list, name="capture-list"),
    path("upload/", views.upload, name="upload"),
    path("c/<str:slug>/", views.capture_page, name="capture"),
    path("c/<str:slug>/frames/<int:n>/", views.frame_page, name="frame"),
    path("c/<str:slug>/raw", views.download_raw, name="capture-raw"),
    path("c/<str:slug>/result.json", views.download_result, name="capture-result"),
]
