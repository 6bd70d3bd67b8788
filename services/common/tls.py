"""Mutual TLS between batchgate processes: whose files, gRPC credentials, reload on change.

Each process reads the cluster CA bundle and, for every identity it acts as (a service name:
the embedded process is ingest, scheduler and results at once), a certificate and key. They
come from the data directory (`batchgate certs init` writes `<data_dir>/certs`) or from the
`tls_*` settings (Kubernetes secrets, cert-manager). Without them a process refuses to start,
naming the settings, unless `insecure_internal` is set (development only).

Rotation without downtime: servers use gRPC's dynamic credentials, whose fetcher runs at each
new handshake and hands over fresh material once the files changed; clients rebuild their
channel when the files changed (checked at most every `RELOAD_CHECK_S` while calls are made)
and retire the old one gracefully. Material is taken only when the key matches the
certificate, so a half-finished replacement keeps the current one in use.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from batchgate.services.common.config import Settings

log = logging.getLogger(__name__)

RELOAD_CHECK_S = 1.0
"""How often a client looks at its files while it makes calls."""
SERVICE_PLACEHOLDER = "{service}"


class MissingMaterial(RuntimeError):
    """TLS files are missing or unusable; the message names the settings to fix."""


@dataclass(frozen=True)
class Paths:
    identity: str
    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pem:
    ca: bytes
    cert: bytes
    key: bytes


def tls_dir(settings: Settings) -> Path:
    return Path(settings.tls_dir) if settings.tls_dir else Path(settings.data_dir) / "certs"


def paths(settings: Settings, identity: str) -> Paths:
    """Where `identity`'s material is: the `tls_*` settings, else `<tls_dir>/…`."""
    base = tls_dir(settings)
    cert = settings.tls_cert_file or str(base / f"{SERVICE_PLACEHOLDER}.crt")
    key = settings.tls_key_file or str(base / f"{SERVICE_PLACEHOLDER}.key")
    return Paths(
        identity,
        Path(settings.tls_ca_file) if settings.tls_ca_file else base / "ca.crt",
        Path(cert.replace(SERVICE_PLACEHOLDER, identity)),
        Path(key.replace(SERVICE_PLACEHOLDER, identity)),
    )


def _read(where: Paths) -> Pem:
    """The files' content, checked: a CA bundle, a certificate and the key that matches it."""
    missing = [
        f"{what} {path} ({setting})"
        for what, path, setting in (
            ("CA bundle", where.ca, "BATCHGATE_TLS_CA_FILE"),
            ("certificate", where.cert, "BATCHGATE_TLS_CERT_FILE"),
            ("key", where.key, "BATCHGATE_TLS_KEY_FILE"),
        )
        if not path.is_file()
    ]
    if missing:
        raise MissingMaterial(
            f"{where.identity}: no TLS material for internal calls: missing "
            + ", ".join(missing)
            + ". Create it with `batchgate certs init` (same BATCHGATE_DATA_DIR), point the "
            "settings at your own files, or set BATCHGATE_INSECURE_INTERNAL=true (development "
            "only: plaintext, unauthenticated)."
        )
    pem = Pem(where.ca.read_bytes(), where.cert.read_bytes(), where.key.read_bytes())
    try:
        x509.load_pem_x509_certificates(pem.ca)
        cert = x509.load_pem_x509_certificate(pem.cert)
        key = serialization.load_pem_private_key(pem.key, password=None)
    except ValueError as exc:
        raise MissingMaterial(f"{where.identity}: unreadable TLS material ({where.cert}): {exc}") from None
    if cert.public_key() != key.public_key():
        raise MissingMaterial(f"{where.identity}: the key {where.key} does not belong to {where.cert}")
    return pem


class Material:
    """One identity's files, re-read when they change (thread-safe: gRPC's server fetcher runs
    on its own threads)."""

    def __init__(self, where: Paths) -> None:
        self.where = where
        self._lock = threading.Lock()
        self._seen = self._signature()
        self.pem = _read(where)

    def _signature(self) -> tuple[tuple[int, int, int], ...]:
        stats = []
        for path in (self.where.ca, self.where.cert, self.where.key):
            try:
                st = os.stat(path)
            except OSError:
                stats.append((0, 0, 0))
            else:
                stats.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(stats)

    def changed(self) -> Pem | None:
        """New material when the files changed since the last look and are usable, else None."""
        with self._lock:
            signature = self._signature()
            if signature == self._seen:
                return None
            self._seen = signature
            try:
                pem = _read(self.where)
            except (MissingMaterial, OSError) as exc:
                log.warning("TLS files changed but are not usable (yet); keeping the current ones: %s", exc)
                return None
            if pem == self.pem:
                return None
            self.pem = pem
            log.info("%s: TLS material reloaded from %s", self.where.identity, self.where.cert)
            return pem


def material(settings: Settings, identity: str) -> Material | None:
    """`identity`'s material, or None when internal calls are plaintext (insecure_internal)."""
    if settings.insecure_internal:
        return None
    return Material(paths(settings, identity))


def _server_config(pem: Pem) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration([(pem.key, pem.cert)], root_certificates=pem.ca)


def server_credentials(source: Material) -> grpc.ServerCredentials:
    """Credentials that demand a client certificate of the cluster CA, following file changes."""

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        try:
            fresh = source.changed()
        except Exception:  # never raise into gRPC's handshake
            log.exception("reloading TLS material failed")
            return None
        return None if fresh is None else _server_config(fresh)

    return grpc.dynamic_ssl_server_credentials(
        _server_config(source.pem), fetch, require_client_authentication=True
    )


def channel_credentials(pem: Pem) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=pem.ca, private_key=pem.key, certificate_chain=pem.cert
    )


def server_name_option(service: str) -> tuple[str, str]:
    """The name a client expects in the server's certificate: the service's identity, whatever
    address (IP, DNS name of several replicas) it dials."""
    return ("grpc.ssl_target_name_override", service)


INSECURE_WARNING = (
    "BATCHGATE_INSECURE_INTERNAL is set: calls between batchgate processes are plaintext and "
    "unauthenticated; anyone who reaches an internal port can lease, record and finalize work. "
    "Development only."
)
