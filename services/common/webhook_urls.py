"""Which webhook URLs batchgate may call (server-side request forgery guard).

A webhook URL must be `http` or `https` with a host, and every address its host resolves to
must be public: loopback, private, link-local (cloud metadata at 169.254.169.254), shared,
multicast, reserved and unspecified addresses are refused, unless the operator's allow-list
(`webhook_allowed_networks`, CIDRs) admits them. Ingest checks the URL at create (400 on
refusal); results checks it again before every delivery and connects only to the addresses
that passed (`guarded_resolver.GuardedResolver`), so a name that later resolves elsewhere
(DNS rebinding) reaches nothing private.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from batchgate.services.common import errors
from batchgate.services.common.config import Settings

SCHEMES = ("http", "https")
MAX_URL_LENGTH = 2048
RESOLVE_TIMEOUT_S = 5.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def networks(raw: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (a bad one raises ValueError: loading checks them at start)."""
    return tuple(ipaddress.ip_network(n.strip(), strict=False) for n in raw.split(",") if n.strip())


def webhook_networks(settings: Settings) -> tuple[Network, ...]:
    """Where webhooks (and guardrails' moderation endpoints) may go besides public addresses."""
    return networks(settings.webhook_allowed_networks)


def tool_networks(settings: Settings) -> tuple[Network, ...]:
    """Where tool servers and workflow callbacks may be; by default where webhooks may go."""
    raw = settings.tool_allowed_networks.strip()
    if not raw:
        return webhook_networks(settings)
    return () if raw.lower() == "none" else networks(raw)


class RefusedUrl(ValueError):
    """The URL may not be called; the message says why (safe to show to its owner)."""


def address_allowed(address: Address, allowed: Sequence[Network]) -> bool:
    """Public unicast addresses, and whatever the allow-list names."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return True
    return address.is_global and not (address.is_multicast or address.is_reserved)


def split_url(url: str) -> tuple[str, int]:
    """(host, port) of a URL with an allowed scheme; raises RefusedUrl otherwise."""
    if len(url) > MAX_URL_LENGTH:
        raise RefusedUrl(f"The URL is longer than {MAX_URL_LENGTH} characters.")
    if _CONTROL.search(url):
        raise RefusedUrl("The URL must not contain control characters (such as NUL or a line break).")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RefusedUrl(f"The URL is malformed: {exc}.") from None
    if parts.scheme not in SCHEMES:
        raise RefusedUrl("The URL must start with http:// or https://.")
    if not parts.hostname:
        raise RefusedUrl("The URL has no host.")
    _check_host_name(parts.hostname)
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _check_host_name(host: str) -> None:
    """RefusedUrl unless `host` is a name the resolver can take: each dot-separated label 1 to
    63 characters (after IDNA encoding), as `getaddrinfo` checks, raising UnicodeError."""
    try:
        host.encode("idna")
    except UnicodeError as exc:
        reason = str(exc.__cause__ or exc)  # the codec's own reason, e.g. "label empty or too long"
        raise RefusedUrl(
            f"The host {host[:80]!r} is not a valid host name ({reason}); each of its dot-separated "
            "labels must be 1 to 63 characters long."
        ) from None


async def allowed_addresses(url: str, allowed: Sequence[Network]) -> list[str]:
    """The addresses `url`'s host resolves to, when every one of them is allowed."""
    host, port = split_url(url)
    try:
        literal: Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_S):
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError, UnicodeError):  # UnicodeError: a name IDNA cannot encode
            raise RefusedUrl(f"The host {host!r} cannot be resolved.") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    refused = [a for a in addresses if not address_allowed(a, allowed)]
    if refused or not addresses:
        raise RefusedUrl(
            f"The host {host!r} resolves to {refused[0] if refused else 'nothing'}, a loopback, private, "
            "link-local or reserved address; webhooks go to public addresses only."
        )
    return [str(a) for a in addresses]


async def check_webhook_url(url: str, settings: Settings) -> None:
    """For create: 400 `invalid_webhook_url` when `url` is set and may not be called."""
    if not url:
        return
    try:
        await allowed_addresses(url, webhook_networks(settings))
    except RefusedUrl as exc:
        raise errors.invalid(f"Invalid 'webhook_url': {exc}", "invalid_webhook_url", "webhook_url") from None
