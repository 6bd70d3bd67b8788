"""The aiohttp resolver of every outbound call to a user's URL (webhooks, tools, moderation).

It returns only the addresses `webhook_urls.address_allowed` admits, at every connection, so a
host name that resolved to a public address when its URL was checked and resolves elsewhere
now (DNS rebinding) reaches nothing private. Apart from `webhook_urls` because it needs
aiohttp, which the settings' loading (and so every CLI command) would otherwise import.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from batchgate.services.common.webhook_urls import Network, address_allowed


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that returns only allowed addresses, so a connection can go nowhere else."""

    def __init__(self, allowed: Sequence[Network]) -> None:
        self._allowed = tuple(allowed)
        self._inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        kept = [r for r in results if address_allowed(ipaddress.ip_address(r["host"]), self._allowed)]
        if not kept:
            raise OSError(f"{host} resolves to no allowed address")
        return kept

    async def close(self) -> None:
        await self._inner.close()
