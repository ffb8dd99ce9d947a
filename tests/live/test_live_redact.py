"""What the proxy stores of a request: secrets removed, everything else kept."""

from __future__ import annotations

import pytest

from inspector.live import redact
from inspector.live.upstreams import parse_upstreams, upstream_url, upstreams


def test_secret_headers():
    for name in ("Authorization", "api-key", "X-Api-Key", "Cookie", "x-goog-api-key"):
        assert redact.is_secret_header(name), name
    for name in ("Content-Type", "OpenAI-Organization", "User-Agent", "X-Inspector-Retry-Chain"):
        assert not redact.is_secret_header(name), name


def test_secret_values_from_headers():
    values = redact.secret_values(
        [
            ("Authorization", "Bearer sk-canary-SECRET123"),
            ("Cookie", "session=abcdefgh12345; theme=dark"),
            ("api-key", "azure-key-0123456789"),
            ("User-Agent", "OpenAI/Python 3.57.0"),
        ]
    )
    assert "sk-canary-SECRET123" in values
    assert "Bearer sk-canary-SECRET123" in values
    assert "abcdefgh12345" in values
    assert "azure-key-0123456789" in values
    assert "dark" not in values  # too short to scrub from text by chance
    assert not any("OpenAI/Python" in v for v in values)
    assert values == sorted(values, key=len, reverse=True)


def test_body_fields_removed_at_any_depth_schemas_kept():
    body = {
        "model": "gpt-4o-mini",
        "max_tokens": 100,
        "max_completion_tokens": 50,
        "api_key": "sk-1",
        "apiKey": "sk-2",
        "metadata": {
            "user": "u1",
            "access_token": "t",
            "client-secret": "c",
            "nested": [{"password": "p"}],
        },
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "login",
                    "parameters": {
                        "type": "object",
                        "properties": {"password": {"type": "string"}, "token": {"type": "string"}},
                        "required": ["password"],
                    },
                },
            }
        ],
        "messages": [{"role": "user", "content": "hello"}],
    }
    out = redact.redact_body(body)
    assert "api_key" not in out and "apiKey" not in out
    assert out["max_tokens"] == 100 and out["max_completion_tokens"] == 50
    assert out["metadata"] == {"user": "u1", "nested": [{}]}
    schema = out["tools"][0]["function"]["parameters"]
    assert schema == body["tools"][0]["function"]["parameters"]
    assert out["messages"] == body["messages"]
    assert body["api_key"] == "sk-1"  # the original is untouched


def test_header_secrets_scrubbed_from_any_string():
    body = {
        "messages": [{"role": "user", "content": "my key is sk-canary-SECRET123, ok?"}],
        "extra": {"sk-canary-SECRET123": 1},
    }
    out = redact.redact_body(body, ["sk-canary-SECRET123"])
    assert out["messages"][0]["content"] == "my key is [redacted], ok?"
    assert out["extra"] == {"[redacted]": 1}


def test_redact_fields_setting_adds_names(settings):
    settings.INSPECTOR_REDACT_FIELDS = ["tenant_code", "X-Customer-Id"]
    out = redact.redact_body(
        {"tenant_code": "T1", "customer_id": "c", "x_customer_id": "z", "a": 1}
    )
    assert out == {"customer_id": "c", "a": 1}


def test_redact_fields_setting_takes_patterns(settings):
    settings.INSPECTOR_REDACT_FIELDS = ["tenant_*"]
    out = redact.redact_body({"tenant_code": "T1", "tenantRegion": "eu", "tenancy": "x"})
    assert out == {"tenancy": "x"}


def test_redact_headers_setting_adds_header_patterns(settings):
    headers = [("X-Acme-Key", "acme-secret-value-1"), ("X-Trace", "trace-value-12345")]
    assert redact.secret_values(headers) == []
    settings.INSPECTOR_REDACT_HEADERS = ["x-*-key"]
    assert redact.is_secret_header("X-Acme-Key") and not redact.is_secret_header("X-Trace")
    assert redact.secret_values(headers) == ["acme-secret-value-1"]
    assert redact.redact_headers(headers) == {
        "X-Acme-Key": "[redacted]",
        "X-Trace": "trace-value-12345",
    }


def test_redact_url():
    url = "https://u:pw@example.openai.azure.com/openai/deployments/x/chat/completions?api-version=2024-06-01&api-key=abc123456789"
    assert redact.redact_url(url) == (
        "https://example.openai.azure.com/openai/deployments/x/chat/completions?api-version=2024-06-01"
    )


def test_parse_upstreams():
    parsed = parse_upstreams("openai=https://llm.example.com/v1/, local=http://127.0.0.1:9100/v1")
    assert parsed == {"openai": "https://llm.example.com/v1", "local": "http://127.0.0.1:9100/v1"}
    assert parse_upstreams("") == {}
    for bad in ("openai", "=http://x/v1", "a=ftp://x", "a b=http://x/v1", "a=http://x/v1?k=1"):
        with pytest.raises(Exception, match="INSPECTOR_UPSTREAMS"):
            parse_upstreams(bad)


def test_upstreams_from_settings(settings):
    settings.INSPECTOR_UPSTREAMS = "fake=http://127.0.0.1:9100/v1"
    assert upstreams() == {"fake": "http://127.0.0.1:9100/v1"}
    assert upstream_url("fake", "chat/completions") == "http://127.0.0.1:9100/v1/chat/completions"
    assert upstream_url("other", "chat/completions") is None
    settings.INSPECTOR_UPSTREAMS = {"x": "https://example.com/v1/"}
    assert upstreams() == {"x": "https://example.com/v1"}


# -- plural names, and containers under a secret name ---------------------------

CANARY_VALUE = "sk-canary-XYZ123"


@pytest.mark.parametrize(
    "body",
    [
        {"tokens": [CANARY_VALUE]},
        {"auth": {"x": CANARY_VALUE}},
        {"credentials": [{"k": CANARY_VALUE}]},
        {"api_keys": [CANARY_VALUE]},
        {"passwords": {"db": CANARY_VALUE}},
        {"secrets": [[CANARY_VALUE], {"deep": {"er": CANARY_VALUE}}]},
        {"cookies": {"session": CANARY_VALUE}},
        {"session": CANARY_VALUE},
        {"access_tokens": [CANARY_VALUE]},
        {"refresh_tokens": [CANARY_VALUE]},
        {"metadata": {"client_secrets": [CANARY_VALUE]}},
        {"auth": {"type": "bearer", "token": CANARY_VALUE, "value": CANARY_VALUE}},
        # "type" alone does not make a schema: "value" is no schema keyword
        {"auth": {"type": "string", "value": CANARY_VALUE}},
        {"credentials": {"type": "object", "properties": {"k": CANARY_VALUE}}},
    ],
)
def test_no_secret_survives_under_a_secret_name(body):
    assert CANARY_VALUE not in str(redact.redact_body(body))


def test_a_secret_container_keeps_its_shape():
    body = {
        "tokens": ["sk-a", "sk-b"],
        "auth": {"x": "sk-c", "n": 12, "on": True, "none": None},
        "credentials": [{"k": "sk-d"}, ["sk-e"]],
        "model": "m",
    }
    assert redact.redact_body(body) == {
        "tokens": ["[redacted]", "[redacted]"],
        "auth": {"x": "[redacted]", "n": "[redacted]", "on": True, "none": None},
        "credentials": [{"k": "[redacted]"}, ["[redacted]"]],
        "model": "m",
    }


def test_plural_names_are_secret_but_token_counts_are_not():
    for name in (
        "tokens",
        "apiKeys",
        "api-keys",
        "passwords",
        "secrets",
        "credentials",
        "cookies",
        "client_secrets",
        "private_keys",
        "access_tokens",
        "Auths",
    ):
        assert redact.is_secret_field(name), name
    for name in (
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "reasoning_tokens",
        "cached_tokens",
        "max_new_tokens",
        "input_tokens",
        "status",
        "access",
        "keys",
        "process",
    ):
        assert not redact.is_secret_field(name), name


def test_tool_schemas_naming_secret_parameters_are_kept_whole():
    parameters = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "description": "the key", "minLength": 8},
            "token": {"type": ["string", "null"], "pattern": "^sk-"},
            "tokens": {"type": "array", "items": {"type": "string"}},
            "auth": {
                "type": "object",
                "properties": {"password": {"type": "string"}, "user": {"type": "string"}},
                "required": ["password"],
                "additionalProperties": False,
            },
            "credentials": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/cred"}]},
            "secret": {"enum": ["a", "b"]},
        },
        "required": ["api_key", "token"],
        "$defs": {"cred": {"type": "object", "properties": {"key": {"type": "string"}}}},
    }
    body = {
        "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "r", "schema": parameters},
        },
    }
    out = redact.redact_body(body)
    assert out == body


def test_redact_url_drops_key_and_signature_parameters():
    url = (
        "https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent"
        f"?alt=sse&key={CANARY_VALUE}&api_key={CANARY_VALUE}&sig={CANARY_VALUE}"
        f"&X-Amz-Signature={CANARY_VALUE}&X-Amz-Credential={CANARY_VALUE}&access_tokens=x"
    )
    assert redact.redact_url(url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse"
    )


def test_a_key_in_the_query_string_is_scrubbed_wherever_the_request_repeats_it(settings, rf):
    from inspector.live.proxy import prepare

    settings.INSPECTOR_UPSTREAMS = "fake=http://127.0.0.1:9100/v1"
    key = "sk-only-in-the-query-789"
    body = {"model": "m", "messages": [{"role": "user", "content": f"my key is {key}"}]}
    request = rf.post(
        f"/proxy/fake/v1/chat/completions?api-key={key}&api-version=2024-10-21",
        data=body,
        content_type="application/json",
    )
    out = prepare(request, "fake", "chat/completions")
    assert key in out.url  # forwarded...
    assert key not in out.request_json and key not in out.source_url  # ...never stored
    assert "api-version=2024-10-21" in out.source_url
    assert redact.query_secret_values("key=short&q=sk-not-a-param-name") == []


def test_upstream_request_urls_are_not_logged():
    """httpx logs each request's URL at INFO, query string and any key in it;
    daphne sets the root logger to INFO."""
    import logging

    root, httpx_log = logging.getLogger(), logging.getLogger("httpx")
    level = root.level
    root.setLevel(logging.INFO)
    try:
        assert not httpx_log.isEnabledFor(logging.INFO)
        assert httpx_log.isEnabledFor(logging.WARNING)
    finally:
        root.setLevel(level)
