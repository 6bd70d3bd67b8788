"""Where a process finds its TLS files, what it says when they are missing, and how it follows
a replacement (never half of one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from batchgate import certs as certs_module
from batchgate.certs import CertDir, write_atomically
from batchgate.services.common import tls
from batchgate.services.common.loading import load_settings


def test_files_default_to_the_data_dir_and_follow_the_settings(tmp_path: Path) -> None:
    default = tls.paths(load_settings(environ={"BATCHGATE_DATA_DIR": str(tmp_path)}), "scheduler")
    assert (default.ca, default.cert, default.key) == (
        tmp_path / "certs" / "ca.crt",
        tmp_path / "certs" / "scheduler.crt",
        tmp_path / "certs" / "scheduler.key",
    )
    # cert-manager's secret mounted as a directory: one pair whatever the service.
    mounted = load_settings(
        environ={
            "BATCHGATE_TLS_CA_FILE": "/etc/tls/ca.crt",
            "BATCHGATE_TLS_CERT_FILE": "/etc/tls/tls.crt",
            "BATCHGATE_TLS_KEY_FILE": "/etc/tls/tls.key",
        }
    )
    where = tls.paths(mounted, "results")
    assert (where.ca, where.cert, where.key) == (
        Path("/etc/tls/ca.crt"),
        Path("/etc/tls/tls.crt"),
        Path("/etc/tls/tls.key"),
    )
    per_service = load_settings(environ={"BATCHGATE_TLS_CERT_FILE": "/etc/tls/{service}/tls.crt"})
    assert tls.paths(per_service, "ingest").cert == Path("/etc/tls/ingest/tls.crt")


def test_missing_material_names_each_file_and_its_setting(tmp_path: Path) -> None:
    settings = load_settings(environ={"BATCHGATE_DATA_DIR": str(tmp_path)})
    with pytest.raises(tls.MissingMaterial) as caught:
        tls.material(settings, "executor")
    message = str(caught.value)
    for expected in (
        f"CA bundle {tmp_path}/certs/ca.crt (BATCHGATE_TLS_CA_FILE)",
        f"certificate {tmp_path}/certs/executor.crt (BATCHGATE_TLS_CERT_FILE)",
        f"key {tmp_path}/certs/executor.key (BATCHGATE_TLS_KEY_FILE)",
        "batchgate certs init",
        "BATCHGATE_INSECURE_INTERNAL=true",
    ):
        assert expected in message
    insecure = load_settings(
        environ={"BATCHGATE_DATA_DIR": str(tmp_path), "BATCHGATE_INSECURE_INTERNAL": "1"}
    )
    assert tls.material(insecure, "executor") is None


def test_a_key_that_does_not_match_its_certificate_is_refused(tmp_path: Path) -> None:
    certs = CertDir.at(tmp_path)
    certs.ensure()
    write_atomically(certs.key("executor"), certs.key("ingest").read_bytes(), private=True)
    with pytest.raises(tls.MissingMaterial, match="does not belong to"):
        tls.Material(tls.paths(load_settings(environ={"BATCHGATE_TLS_DIR": str(tmp_path)}), "executor"))


def test_a_replacement_is_taken_once_whole(tmp_path: Path) -> None:
    certs = CertDir.at(tmp_path)
    certs.ensure()
    material = tls.Material(
        tls.paths(load_settings(environ={"BATCHGATE_TLS_DIR": str(tmp_path)}), "executor")
    )
    first = material.pem
    assert material.changed() is None  # nothing changed
    cert, key = certs_module.issue(*certs.signing_ca(), "executor")
    write_atomically(certs.key("executor"), key, private=True)  # half of the replacement
    assert material.changed() is None and material.pem == first
    write_atomically(certs.cert("executor"), cert)  # the other half
    fresh = material.changed()
    assert fresh is not None and fresh.cert == cert and material.pem == fresh
    assert material.changed() is None


def test_certificates_name_their_identity_and_serve_both_ends(tmp_path: Path) -> None:
    certs = CertDir.at(tmp_path)
    issued = certs.ensure()
    assert sorted(i.name for i in issued) == sorted(certs_module.IDENTITIES)
    assert certs.ensure() == []  # idempotent: nothing reissued
    cert = x509.load_pem_x509_certificate(certs.cert("scheduler").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["scheduler"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {u.dotted_string for u in usages} == {"1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"}
    assert oct(certs.key("scheduler").stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError, match="unknown identity"):
        certs.issue("intruder")


def test_ca_rotation_trusts_both_then_only_the_new(tmp_path: Path) -> None:
    certs = CertDir.at(tmp_path)
    certs.ensure()
    old = x509.load_pem_x509_certificates(certs.ca_cert.read_bytes())
    certs.begin_ca_rotation()
    both = x509.load_pem_x509_certificates(certs.ca_cert.read_bytes())
    assert len(both) == 2 and both[0] == old[0]
    new_ca, _ = certs.signing_ca()
    assert x509.load_pem_x509_certificate(new_ca) == both[1]
    certs.issue("executor")
    issued = x509.load_pem_x509_certificate(certs.cert("executor").read_bytes())
    assert issued.issuer == both[1].subject != both[0].subject
    issued.verify_directly_issued_by(both[1])
    certs.finish_ca_rotation()
    assert x509.load_pem_x509_certificates(certs.ca_cert.read_bytes()) == [both[1]]
