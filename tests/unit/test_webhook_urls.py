"""Webhook URLs: only http(s) to public addresses, unless the operator's allow-list admits them."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from batchgate.services.common import errors
from batchgate.services.common.guarded_resolver import GuardedResolver
from batchgate.services.common.loading import load_settings
from batchgate.services.common.webhook_urls import (
    RefusedUrl,
    address_allowed,
    allowed_addresses,
    check_webhook_url,
    split_url,
)

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:10.0.0.1",
        "::2",
    ],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert not address_allowed(ipaddress.ip_address(address), [])


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_allowed(ipaddress.ip_address(address), [])


def test_the_allow_list_admits_its_networks_only() -> None:
    assert address_allowed(ipaddress.ip_address("127.0.0.5"), LOOPBACK)
    assert address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"), LOOPBACK)
    assert not address_allowed(ipaddress.ip_address("10.0.0.1"), LOOPBACK)
    assert not address_allowed(ipaddress.ip_address("fe80::1"), LOOPBACK)


@pytest.mark.parametrize(
    "url, reason",
    [
        ("ftp://8.8.8.8/x", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http:///path", "no host"),
        ("http://8.8.8.8:99999/", "malformed"),
        ("http://10.0.0.1/hook", "10.0.0.1"),
        ("http://[::1]:8000/hook", "::1"),
        ("http://localhost:8000/hook", "resolves to (127.0.0.1|::1)"),
        ("https://" + "a" * 2100 + ".example/", "longer than"),
    ],
)
def test_urls_are_refused_with_a_reason(url: str, reason: str) -> None:
    with pytest.raises(RefusedUrl, match=reason):
        asyncio.run(allowed_addresses(url, []))


def test_names_resolve_and_the_allow_list_applies_to_what_they_resolve_to() -> None:
    assert "127.0.0.1" in asyncio.run(allowed_addresses("http://localhost:8000/hook", LOOPBACK))
    assert asyncio.run(allowed_addresses("https://8.8.8.8/hook", [])) == ["8.8.8.8"]


def test_check_for_create_answers_400_and_ignores_an_empty_url() -> None:
    settings = load_settings(environ={})
    asyncio.run(check_webhook_url("", settings))
    with pytest.raises(errors.ApiError) as caught:
        asyncio.run(check_webhook_url("http://192.168.0.10/", settings))
    assert caught.value.status == 400
    assert caught.value.code == "invalid_webhook_url" and caught.value.param == "webhook_url"


def test_the_connection_resolver_drops_refused_addresses() -> None:
    async def resolve(allowed: list[ipaddress.IPv4Network]) -> list[str]:
        resolver = GuardedResolver(allowed)
        try:
            return [r["host"] for r in await resolver.resolve("localhost", 80)]
        finally:
            await resolver.close()

    assert "127.0.0.1" in asyncio.run(resolve(LOOPBACK))
    assert asyncio.run(resolve(LOOPBACK[:1])) == ["127.0.0.1"]
    with pytest.raises(OSError, match="no allowed address"):
        asyncio.run(resolve([]))


def test_a_bad_allow_list_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="webhook_allowed_networks"):
        load_settings(environ={"BATCHGATE_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/33"})


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://" + "a" * 64 + ".example/hook", "not a valid host name"),  # label over 63 chars
        ("http://a..b.example/hook", "not a valid host name"),  # empty label
        ("http://.example/hook", "not a valid host name"),
        ("http://8.8.8.8/a\x00b", "control characters"),  # PostgreSQL refuses NUL in text
        ("http://8.8.8.8\x00/hook", "control characters"),
        ("http://8.8.8.8/a\nb", "control characters"),  # urlsplit would drop it silently
    ],
)
def test_hosts_the_resolver_cannot_take_and_control_characters_are_refused(url: str, reason: str) -> None:
    """getaddrinfo raises UnicodeError (not OSError) for a label IDNA cannot encode."""
    with pytest.raises(RefusedUrl, match=reason):
        split_url(url)
    with pytest.raises(RefusedUrl, match=reason):
        asyncio.run(allowed_addresses(url, []))


def test_a_trailing_dot_and_international_names_are_host_names() -> None:
    assert split_url("https://example.com./hook") == ("example.com.", 443)
    assert split_url("http://bücher.example:8080/") == ("bücher.example", 8080)
