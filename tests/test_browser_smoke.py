"""Real Chromium against a real daphne server (sorted last by conftest, pitfall 3)."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_health_and_admin_login_render(page, daphne_url, output_path):
    response = page.goto(daphne_url + "/health")
    assert response is not None and response.status == 200
    expect(page.locator("body")).to_have_text("ok")

    page.goto(daphne_url + "/admin/login/")
    expect(page.locator("#site-name")).to_contain_text("Django administration")
    png = page.screenshot(path=f"{output_path}/admin_login.png", full_page=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_daphne_serves_the_test_database(page, daphne_url, transactional_db, output_path):
    """A committed row written here is visible to the daphne subprocess (same test DB)."""
    from django.contrib.auth.models import User

    User.objects.create_superuser("inspector", "inspector@example.com", "s3cret-pass")
    page.goto(daphne_url + "/admin/login/")
    page.fill("#id_username", "inspector")
    page.fill("#id_password", "s3cret-pass")
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text("inspector")
    page.screenshot(path=f"{output_path}/admin_index.png", full_page=True)
