"""The cluster CA and per-process certificates (`batchgate certs …`, `batchgate up`).

Every batchgate process proves who it is with a certificate signed by one cluster CA; the
service name is the certificate's DNS subject alternative name, which is what the servers
authorize on (`batchgate.services.common.authz`). This module writes them, with the `cryptography`
package (no openssl subprocess), the way CockroachDB's `cert create-ca` / `create-node` do:

- `ca.crt`: the trust bundle every process reads (one CA, or two while one replaces the other);
- `ca.key`: the CA's signing key, needed only to issue certificates (keep it off the servers);
- `<name>.crt` / `<name>.key`: one identity's certificate and key.

Keys are ECDSA P-256: fast to generate (a whole set takes milliseconds) and to handshake.
Files are replaced atomically (written aside, then renamed), so a process that reloads on
change (`batchgate.services.common.tls`) never reads half a file; a key is written before its
certificate, and a reader that finds a pair that does not match keeps its current one.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from batchgate.services.common.authz import IDENTITIES

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
CA_DAYS = 3650
CERT_DAYS = 365
_CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Issued:
    name: str
    cert: Path
    key: Path


def write_atomically(path: Path, data: bytes, private: bool = False) -> None:
    """Replace `path` with `data` in one rename (0600 for keys)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def create_ca() -> tuple[bytes, bytes]:
    """A new self-signed CA: (certificate PEM, key PEM). Its name carries its creation time, so
    two CAs in one bundle (during a rotation) never share a subject."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    common_name = f"batchgate cluster CA {now:%Y-%m-%dT%H:%M:%S.%fZ}"
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue(ca_cert_pem: bytes, ca_key_pem: bytes, name: str, days: int = CERT_DAYS) -> tuple[bytes, bytes]:
    """A certificate for identity `name` (its DNS SAN), good as server and as client."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key written by `batchgate certs init`")
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def check_name(name: str) -> None:
    if name not in IDENTITIES:
        raise ValueError(f"unknown identity {name!r}: one of {', '.join(IDENTITIES)}")


@dataclass(frozen=True)
class CertDir:
    """A directory of cluster certificates (`<data_dir>/certs` unless told otherwise)."""

    path: Path
    ca_key: Path

    @classmethod
    def at(cls, path: Path | str, ca_key: Path | str | None = None) -> CertDir:
        path = Path(path)
        return cls(path, Path(ca_key) if ca_key else path / CA_KEY)

    @property
    def ca_cert(self) -> Path:
        return self.path / CA_CERT

    def cert(self, name: str) -> Path:
        return self.path / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.path / f"{name}.key"

    def signing_ca(self) -> tuple[bytes, bytes]:
        """(certificate, key) of the CA that issues: the bundle's certificate matching `ca.key`."""
        if not self.ca_key.exists():
            raise FileNotFoundError(f"no CA key at {self.ca_key}: run `batchgate certs init` first")
        key_pem = self.ca_key.read_bytes()
        public = serialization.load_pem_private_key(key_pem, password=None).public_key()
        for cert in x509.load_pem_x509_certificates(self.ca_cert.read_bytes()):
            if cert.public_key() == public:
                return cert.public_bytes(serialization.Encoding.PEM), key_pem
        raise ValueError(f"no certificate in {self.ca_cert} matches the CA key {self.ca_key}")

    def init_ca(self) -> bool:
        """Create the CA unless one exists; True when it was created."""
        if self.ca_key.exists() and self.ca_cert.exists():
            return False
        cert, key = create_ca()
        write_atomically(self.ca_key, key, private=True)
        write_atomically(self.ca_cert, cert)
        return True

    def issue(self, name: str, days: int = CERT_DAYS) -> Issued:
        """(Re)issue `name`'s certificate from the signing CA: key first, then certificate."""
        check_name(name)
        cert, key = issue(*self.signing_ca(), name, days)
        write_atomically(self.key(name), key, private=True)
        write_atomically(self.cert(name), cert)
        return Issued(name, self.cert(name), self.key(name))

    def missing(self) -> list[str]:
        return [n for n in IDENTITIES if not (self.cert(n).exists() and self.key(n).exists())]

    def ensure(self) -> list[Issued]:
        """The CA and a certificate for every identity, creating what is missing (idempotent)."""
        self.init_ca()
        return [self.issue(name) for name in self.missing()]

    def begin_ca_rotation(self) -> None:
        """Step 1 of replacing the CA: a new CA signs from now on, and the bundle trusts both
        (the old one stays until `finish_ca_rotation`)."""
        old = self.ca_cert.read_bytes()
        cert, key = create_ca()
        write_atomically(self.ca_key, key, private=True)
        write_atomically(self.ca_cert, old.rstrip(b"\n") + b"\n" + cert)

    def finish_ca_rotation(self) -> None:
        """Last step: the bundle trusts only the signing CA (every certificate is reissued)."""
        signing, _key = self.signing_ca()
        write_atomically(self.ca_cert, signing)
