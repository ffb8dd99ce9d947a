"""Fixtures of the access tests: a user, login mode, sharing off, tokens."""

from __future__ import annotations

import pytest
from access_helpers import PASSWORD


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password=PASSWORD)


@pytest.fixture
def login_mode(settings):
    settings.INSPECTOR_REQUIRE_LOGIN = True
    settings.INSPECTOR_SHARING = True
    settings.INSPECTOR_API_TOKENS = []
    return settings


@pytest.fixture
def open_mode(settings):
    settings.INSPECTOR_REQUIRE_LOGIN = False
    settings.INSPECTOR_SHARING = True
    settings.INSPECTOR_API_TOKENS = []
    return settings


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client
