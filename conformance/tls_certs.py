"""Test certificates made with the `cryptography` package: a CA, a broker certificate for
127.0.0.1/localhost and client certificates, written as PEM files Kafka's PEM stores accept.

    certs = make_certs(tmp_path)             # CA, broker, clients "alice" and "bob"
    certs.ca_pem                             # path of the CA certificate (a PEM trust store)
    certs.broker_keystore                    # path of key + chain in one PEM file (ssl.keystore.location)
    certs.client("alice").cert_pem           # client certificate, key: .key_pem, both: .keystore

No pytest dependency, so bench scripts can use it too.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertFiles", "TestCerts", "make_certs"]

_VALID = datetime.timedelta(days=2)


@dataclass(slots=True)
class CertFiles:
    """One certificate and its key as PEM files, plus both in one file (a PEM key store)."""

    cert_pem: Path
    key_pem: Path
    keystore: Path
    subject: str  # RFC 2253, as Kafka prints it

    @property
    def cert_text(self) -> str:
        return self.cert_pem.read_text()

    @property
    def key_text(self) -> str:
        return self.key_pem.read_text()


@dataclass(slots=True)
class TestCerts:
    directory: Path
    ca_pem: Path
    broker: CertFiles
    clients: dict[str, CertFiles] = field(default_factory=dict)
    _ca_key: object = None
    _ca_cert: object = None

    @property
    def broker_keystore(self) -> Path:
        return self.broker.keystore

    def client(self, name: str, *, org_unit: str = "eng", key_password: str | None = None) -> CertFiles:
        """Client certificate CN=<name>,OU=<org_unit>,O=acme (made on first use)."""
        label = "-".join(x for x in (name, org_unit, "enc" if key_password else "") if x)
        if label not in self.clients:
            self.clients[label] = _issue(self.directory, f"client-{label}", self._ca_key, self._ca_cert,
                                         _name(name, org_unit), server=False, key_password=key_password)
        return self.clients[label]


def _name(common_name: str, org_unit: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme")]
    if org_unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, org_unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _write_key(path: Path, key, password: str | None) -> None:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    path.chmod(0o600)


def _issue(directory: Path, stem: str, ca_key, ca_cert, subject: x509.Name, *, server: bool,
           key_password: str | None = None) -> CertFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1"))]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                               ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_pem, key_pem, keystore = (directory / f"{stem}.crt", directory / f"{stem}.key", directory / f"{stem}.pem")
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_pem, key, key_password)
    keystore.write_bytes(key_pem.read_bytes() + cert_pem.read_bytes())
    keystore.chmod(0o600)
    return CertFiles(cert_pem, key_pem, keystore, subject.rfc4514_string())


def make_certs(directory: Path) -> TestCerts:
    """A fresh CA and a broker certificate (SANs localhost, 127.0.0.1, ::1) under `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "kafkapy test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = directory / "ca.crt"
    ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    broker = _issue(directory, "broker", ca_key, ca_cert, _name("localhost", "brokers"), server=True)
    return TestCerts(directory, ca_pem, broker, {}, ca_key, ca_cert)


def tls_listener_overrides(certs: TestCerts, plain: int, ssl_port: int, mtls_port: int) -> dict[str, str]:
    """Broker properties for three listeners on 127.0.0.1: PLAINTEXT, SSL (server certificate only)
    and MTLS (SSL requiring a client certificate), with the test CA's broker key store, as PEM."""
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}"
    return {
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
        "listener.name.mtls.ssl.client.auth": "required",
    }
