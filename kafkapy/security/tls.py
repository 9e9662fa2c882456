"""TLS for SSL and SASL_SSL listeners: Kafka's ssl.* settings turned into an ssl.SSLContext.

Settings resolve as Kafka's channel builders do: for listener X, `listener.name.x.ssl.foo` wins
over `ssl.foo`, key by key. The server context (one per listener) and the inter-broker client
context are built once; bad or missing key material raises ConfigError naming the key, so the
broker refuses to start with one line.

A client certificate becomes the connection's principal: `User:<subject DN>` with the DN written
as Java's X500Principal.getName() does (RFC 2253: "CN=alice,OU=eng,O=acme"), after
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper syntax; `principal_name`).
"""
from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
import weakref
from dataclasses import dataclass

from ..metadata.errors import ConfigError
from .principal import ANONYMOUS, KafkaPrincipal

__all__ = [
    "TLS_PROTOCOLS", "ListenerSSLContext", "NoMatchingRule", "client_ssl_context", "inter_broker_listener",
    "inter_broker_ssl_context", "java_cipher_to_openssl", "parse_mapping_rules", "peer_principal",
    "principal_name", "server_ssl_context", "subject_dn",
]

log = logging.getLogger(__name__)

TLS_PROTOCOLS = ("SSL", "SASL_SSL")

_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# ssl.protocol (Java's SSLContext.getInstance name) -> the newest version it allows
_CONTEXT_PROTOCOLS = {"TLS": "TLSv1.3", "TLSv1": "TLSv1", "TLSv1.1": "TLSv1.1", "TLSv1.2": "TLSv1.2",
                      "TLSv1.3": "TLSv1.3", "SSL": "TLSv1.3", "SSLv3": "TLSv1"}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_SENSITIVE = {"ssl.key.password", "ssl.keystore.key", "ssl.keystore.password", "ssl.truststore.password"}


class ListenerSSLContext(ssl.SSLContext):
    """An SSLContext that also carries how its listener turns a client certificate into a principal."""

    principal_rules: list[_Rule] | None = None
    listener_name: str = ""


# -- settings ---------------------------------------------------------------------------------------

class _Settings:
    """The ssl.* values of one listener: `listener.name.<name>.ssl.*` over `ssl.*`, as Kafka resolves them."""

    def __init__(self, config, listener_name: str | None):
        self.config = config
        self.prefix = f"listener.name.{listener_name.lower()}." if listener_name else ""

    def key(self, name: str) -> str:
        """The key the value of `name` came from (for error messages)."""
        if self.prefix and self.config.get(self.prefix + name) is not None:
            return self.prefix + name
        return name

    def get(self, name: str):
        if self.prefix:
            value = self.config.get_as(self.prefix + name, name)  # typed as `name` is
            if value is not None:
                return getattr(value, "value", value)  # Password -> its text
        value = self.config.get(name)
        return getattr(value, "value", value)  # Password -> its text

    def error(self, name: str, reason: str, value=None) -> ConfigError:
        key = self.key(name)
        shown = "[hidden]" if name in _SENSITIVE else (value if value is not None else self.get(name))
        return ConfigError.invalid_value(key, shown, reason)


# -- key material -----------------------------------------------------------------------------------

def _load_key_and_chain(context: ssl.SSLContext, settings: _Settings, required: bool) -> None:
    """Load the keystore (ssl.keystore.*) into `context`; a server needs one, a client may go without."""
    kind = (settings.get("ssl.keystore.type") or "JKS").upper()
    location = settings.get("ssl.keystore.location")
    chain = settings.get("ssl.keystore.certificate.chain")
    key = settings.get("ssl.keystore.key")
    key_password = settings.get("ssl.key.password")
    if chain or key:
        if kind != "PEM":
            raise settings.error("ssl.keystore.type", "ssl.keystore.certificate.chain and ssl.keystore.key "
                                 "need ssl.keystore.type=PEM", kind)
        if location:
            raise settings.error("ssl.keystore.location", "give either ssl.keystore.location or "
                                 "ssl.keystore.certificate.chain + ssl.keystore.key, not both")
        if not chain:
            raise settings.error("ssl.keystore.certificate.chain", "missing while ssl.keystore.key is set")
        if not key:
            raise settings.error("ssl.keystore.key", "missing while ssl.keystore.certificate.chain is set")
        _load_pem_pair(context, settings, _pem_block(chain), _pem_block(key), key_password)
        return
    if not location:
        if required:
            raise settings.error("ssl.keystore.location", "an SSL listener needs a key store (ssl.keystore.location,"
                                 " or ssl.keystore.certificate.chain and ssl.keystore.key with ssl.keystore.type=PEM)")
        return
    if kind == "PEM":
        data = _read(settings, "ssl.keystore.location", location)
        try:
            context.load_cert_chain(location, password=_password(key_password))
        except ssl.SSLError as exc:
            raise settings.error("ssl.keystore.location", _why(exc, "no private key and certificate chain in the "
                                 "file, or ssl.key.password does not decrypt the key", data)) from None
    elif kind == "PKCS12":
        chain_pem, key_pem = _pkcs12_to_pem(settings, location)
        _load_pem_pair(context, settings, chain_pem, key_pem, None, source="ssl.keystore.location")
    elif kind == "JKS":
        raise settings.error("ssl.keystore.type", "JKS key stores are Java-only; convert it with `keytool "
                             "-importkeystore -deststoretype PKCS12` or use PEM", kind)
    else:
        raise settings.error("ssl.keystore.type", "supported types are PEM and PKCS12", kind)


def _load_trust(context: ssl.SSLContext, settings: _Settings, purpose: ssl.Purpose) -> None:
    """Load the trust store (ssl.truststore.*); without one, the system's default CAs (Java: cacerts)."""
    kind = (settings.get("ssl.truststore.type") or "JKS").upper()
    location = settings.get("ssl.truststore.location")
    inline = settings.get("ssl.truststore.certificates")
    if inline:
        if kind != "PEM":
            raise settings.error("ssl.truststore.type", "ssl.truststore.certificates needs ssl.truststore.type=PEM",
                                 kind)
        if location:
            raise settings.error("ssl.truststore.location",
                                 "give either ssl.truststore.location or ssl.truststore.certificates, not both")
        try:
            context.load_verify_locations(cadata=_pem_block(inline))
        except (ssl.SSLError, ValueError) as exc:
            raise settings.error("ssl.truststore.certificates", _why(exc, "no PEM certificate in the value")) from None
        return
    if not location:
        context.load_default_certs(purpose)
        return
    if kind == "PEM":
        data = _read(settings, "ssl.truststore.location", location)
        if b"-----BEGIN CERTIFICATE-----" not in data:
            raise settings.error("ssl.truststore.location", "no PEM certificate in the file")
        try:
            context.load_verify_locations(cafile=location)
        except ssl.SSLError as exc:
            raise settings.error("ssl.truststore.location", _why(exc, "not a PEM certificate file")) from None
    elif kind == "PKCS12":
        pkcs12 = _pkcs12_module(settings, "ssl.truststore.type")
        data = _read(settings, "ssl.truststore.location", location)
        password = settings.get("ssl.truststore.password")
        try:
            certs = pkcs12.load_pkcs12(data, password.encode() if password else None).additional_certs
        except (ValueError, TypeError) as exc:
            raise settings.error("ssl.truststore.location", f"cannot read the PKCS12 trust store: {exc}") from None
        from cryptography.hazmat.primitives.serialization import Encoding

        pem = "".join(c.certificate.public_bytes(Encoding.PEM).decode() for c in certs)
        if not pem:
            raise settings.error("ssl.truststore.location", "no certificate in the PKCS12 trust store")
        context.load_verify_locations(cadata=pem)
    elif kind == "JKS":
        raise settings.error("ssl.truststore.type", "JKS trust stores are Java-only; convert it to PKCS12 or PEM",
                             kind)
    else:
        raise settings.error("ssl.truststore.type", "supported types are PEM and PKCS12", kind)


def _pem_block(text: str) -> str:
    """Kafka lets PEM values sit on one properties line; put the line breaks back where needed."""
    text = text.strip()
    if "\n" in text:
        return text + "\n"
    out = []
    for match in re.finditer(r"(-----BEGIN [A-Z0-9 ]+-----)(.*?)(-----END [A-Z0-9 ]+-----)", text, re.S):
        body = re.sub(r"\s+", "", match.group(2))
        out.append(match.group(1) + "\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
                   + "\n" + match.group(3) + "\n")
    return "".join(out) or text


def _load_pem_pair(context: ssl.SSLContext, settings: _Settings, chain: str, key: str, password: str | None,
                   source: str | None = None) -> None:
    # ssl only loads key material from files: write both to a private file and remove it at once
    fd, path = tempfile.mkstemp(prefix="kafkapy-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key if key.endswith("\n") else key + "\n")
            out.write(chain)
        context.load_cert_chain(path, password=_password(password))
    except ssl.SSLError as exc:
        if source:
            name, hint = source, "the key and certificate chain do not load"
        elif "-----BEGIN CERTIFICATE-----" not in chain:
            name, hint = "ssl.keystore.certificate.chain", "no PEM certificate in the value"
        elif "PRIVATE KEY-----" not in key:
            name, hint = "ssl.keystore.key", "no PEM private key in the value"
        elif "ENCRYPTED" in key:
            name, hint = "ssl.key.password", "it does not decrypt ssl.keystore.key, or the key does not match the chain"
        else:
            name, hint = "ssl.keystore.key", "the key does not load or does not match ssl.keystore.certificate.chain"
        raise settings.error(name, _why(exc, hint)) from None
    finally:
        os.unlink(path)


def _pkcs12_module(settings: _Settings, key: str):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise settings.error(key, "PKCS12 stores need the `cryptography` package (pip install cryptography); "
                             "or use PEM") from None
    return pkcs12


def _pkcs12_to_pem(settings: _Settings, location: str) -> tuple[str, str]:
    pkcs12 = _pkcs12_module(settings, "ssl.keystore.type")
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    data = _read(settings, "ssl.keystore.location", location)
    password = settings.get("ssl.keystore.password")
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise settings.error("ssl.keystore.location", f"cannot read the PKCS12 key store (wrong "
                             f"ssl.keystore.password?): {exc}") from None
    if key is None or cert is None:
        raise settings.error("ssl.keystore.location", "the PKCS12 key store holds no private key and certificate")
    chain = "".join(c.public_bytes(Encoding.PEM).decode() for c in [cert, *extra])
    return chain, key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()


def _read(settings: _Settings, name: str, location: str) -> bytes:
    try:
        with open(location, "rb") as f:
            return f.read()
    except OSError as exc:
        raise settings.error(name, f"cannot read {location}: {exc.strerror or exc}", location) from None


def _password(value: str | None):
    # never None: OpenSSL would then prompt for the pass phrase on the terminal
    return value if value else (lambda: b"")


def _why(exc: Exception, hint: str, data: bytes | None = None) -> str:
    if data is not None and b"-----BEGIN" not in data:
        return "not a PEM file"
    reason = getattr(exc, "reason", None) or str(exc)
    return f"{hint} ({reason})"


# -- protocols and cipher suites ---------------------------------------------------------------------

def _apply_protocols(context: ssl.SSLContext, settings: _Settings) -> None:
    protocol = settings.get("ssl.protocol") or "TLSv1.3"
    if protocol not in _CONTEXT_PROTOCOLS:
        raise settings.error("ssl.protocol", f"supported: {', '.join(_CONTEXT_PROTOCOLS)}", protocol)
    enabled = settings.get("ssl.enabled.protocols") or []
    if isinstance(enabled, str):
        enabled = [p for p in re.split(r"\s*,\s*", enabled.strip()) if p]
    unknown = [p for p in enabled if p not in _TLS_VERSIONS]
    if unknown:
        raise settings.error("ssl.enabled.protocols", f"unknown protocol {unknown[0]}; supported: "
                             f"{', '.join(_TLS_VERSIONS)}", ",".join(enabled))
    if not enabled:  # Java: the protocols the context's protocol enables by default
        newest = _CONTEXT_PROTOCOLS[protocol]
        enabled = ["TLSv1.2", newest] if newest in ("TLSv1.2", "TLSv1.3") else [newest]
    versions = sorted(_TLS_VERSIONS[p] for p in enabled)
    try:
        context.minimum_version = versions[0]
        context.maximum_version = versions[-1]
    except (ValueError, ssl.SSLError) as exc:
        raise settings.error("ssl.enabled.protocols", f"not supported by this OpenSSL: {exc}",
                             ",".join(enabled)) from None


_JAVA_CIPHER = re.compile(r"TLS_(?:(?P<kx>[A-Z0-9]+(?:_[A-Z0-9]+)?)_WITH_)?(?P<cipher>.+)")


def java_cipher_to_openssl(name: str) -> str:
    """Java's (IANA) cipher suite name in OpenSSL's spelling; OpenSSL names come back unchanged.

    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256,
    TLS_RSA_WITH_AES_256_CBC_SHA -> AES256-SHA, TLS_AES_128_GCM_SHA256 (TLS 1.3) -> unchanged.
    """
    match = _JAVA_CIPHER.fullmatch(name)
    if not match or not match.group("kx"):
        return name
    kx = match.group("kx")
    cipher = match.group("cipher")
    parts = {"RSA": [], "ECDHE_RSA": ["ECDHE", "RSA"], "ECDHE_ECDSA": ["ECDHE", "ECDSA"],
             "DHE_RSA": ["DHE", "RSA"], "DHE_DSS": ["DHE", "DSS"]}.get(kx, kx.split("_"))
    m = re.fullmatch(r"(AES|CAMELLIA|ARIA)_(128|256)_(GCM|CBC|CCM|CCM_8)_(SHA|SHA256|SHA384)", cipher)
    if m:
        algo, bits, mode, mac = m.groups()
        if mode == "CBC":
            body = [f"{algo}{bits}", mac]
        elif mode.startswith("CCM"):
            body = [f"{algo}{bits}", mode.replace("_", "")]
        else:
            body = [f"{algo}{bits}", mode, mac]
    elif cipher == "CHACHA20_POLY1305_SHA256":
        body = ["CHACHA20", "POLY1305"]
    else:
        return name
    return "-".join(parts + body)


def _apply_ciphers(context: ssl.SSLContext, settings: _Settings) -> None:
    suites = settings.get("ssl.cipher.suites") or []
    if isinstance(suites, str):
        suites = [s for s in re.split(r"\s*,\s*", suites.strip()) if s]
    if not suites:
        return
    tls13 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.3"}
    names = [java_cipher_to_openssl(s) for s in suites]
    # TLS 1.3 suites cannot be narrowed through Python's ssl (no SSL_CTX_set_ciphersuites): named
    # ones are accepted and all of OpenSSL's TLS 1.3 suites stay enabled
    older = [n for n in names if n not in tls13]
    if not older:
        return
    try:
        context.set_ciphers(":".join(older))
    except ssl.SSLError:
        raise settings.error("ssl.cipher.suites", "no cipher suite in the list is known to OpenSSL",
                             ",".join(suites)) from None
    known = {c["name"] for c in context.get_ciphers()}
    missing = [s for s, n in zip(suites, names) if n not in known and n not in tls13]
    if missing:
        raise settings.error("ssl.cipher.suites", f"unknown cipher suite {missing[0]}", ",".join(suites))


# -- contexts -----------------------------------------------------------------------------------------

_server_contexts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_client_contexts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def server_ssl_context(config, listener) -> ssl.SSLContext | None:
    """The server context of `listener`, None for PLAINTEXT and SASL_PLAINTEXT listeners."""
    if listener.security_protocol not in TLS_PROTOCOLS:
        return None
    cached = _server_contexts.setdefault(config, {})
    if listener.name in cached:
        return cached[listener.name]
    settings = _Settings(config, listener.name)
    context = ListenerSSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.listener_name = listener.name
    auth = (settings.get("ssl.client.auth") or "none").lower()
    if listener.security_protocol == "SASL_SSL" and settings.key("ssl.client.auth") == "ssl.client.auth":
        auth = "none"  # KIP-684: SASL_SSL listeners take ssl.client.auth only with the listener prefix
    if auth not in _CLIENT_AUTH:
        raise settings.error("ssl.client.auth", "must be one of required, requested, none", auth)
    _apply_protocols(context, settings)
    _apply_ciphers(context, settings)
    _load_key_and_chain(context, settings, required=True)
    context.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        _load_trust(context, settings, ssl.Purpose.CLIENT_AUTH)
    rules = settings.get("ssl.principal.mapping.rules") or "DEFAULT"
    try:
        context.principal_rules = parse_mapping_rules(rules)
    except ValueError as exc:
        raise settings.error("ssl.principal.mapping.rules", str(exc), rules) from None
    cached[listener.name] = context
    return context


def inter_broker_listener(config):
    """The listener brokers talk to each other on: inter.broker.listener.name, else the first one whose
    protocol is security.inter.broker.protocol (as cluster_member resolves it)."""
    wanted = config.get("inter.broker.listener.name")
    if wanted:
        return next((lst for lst in config.listeners if lst.name == wanted.upper()), None)
    protocol = config.get("security.inter.broker.protocol")
    return next((lst for lst in config.listeners if lst.security_protocol == protocol), None)


def client_ssl_context(config, listener_name: str | None = None) -> ssl.SSLContext:
    """A client context from the ssl.* settings (of `listener_name` when given): the trust store
    verifies the server, ssl.endpoint.identification.algorithm=https checks its host name, and the key
    store, when there is one, answers a server that asks for a client certificate."""
    settings = _Settings(config, listener_name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _apply_protocols(context, settings)
    _apply_ciphers(context, settings)
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    if algorithm not in (None, "", "https", "HTTPS"):
        raise settings.error("ssl.endpoint.identification.algorithm", "supported: https, or empty for none")
    context.check_hostname = bool(algorithm)
    context.verify_mode = ssl.CERT_REQUIRED
    _load_trust(context, settings, ssl.Purpose.SERVER_AUTH)
    _load_key_and_chain(context, settings, required=False)
    return context


def inter_broker_ssl_context(config) -> ssl.SSLContext | None:
    """The context of broker-to-broker connections (BrokerConnection's ssl_context), None when the
    inter-broker listener is PLAINTEXT or SASL_PLAINTEXT. Built once per config."""
    listener = inter_broker_listener(config)
    if listener is None or listener.security_protocol not in TLS_PROTOCOLS:
        return None
    cached = _client_contexts.get(config)
    if cached is None or cached[0] != listener.name:
        cached = _client_contexts[config] = (listener.name, client_ssl_context(config, listener.name))
    return cached[1]


# -- the client certificate's principal ---------------------------------------------------------------

class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules rule applies to a DN (Kafka fails the authentication)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    """One SslPrincipalMapper rule: DEFAULT, or RULE:pattern/replacement/[LU]."""

    pattern: re.Pattern | None = None
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(lambda m: _expand_java_replacement(self.replacement, m), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


def parse_mapping_rules(text: str | None) -> list[_Rule]:
    """Parse ssl.principal.mapping.rules as Kafka's SslPrincipalMapper.fromRules; ValueError on a bad rule."""
    if text is None:
        text = "DEFAULT"
    rules: list[_Rule] = []
    stripped = text.strip()
    pos = 0
    while pos <= len(stripped):
        match = _RULE_SPLITTER.search(stripped, pos)
        if match is None:
            break
        rule = match.group(1)
        pos = match.end() if match.end() > pos else pos + 1
        parsed = _RULE_PARSER.match(rule)
        if parsed is None or parsed.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`")
        if parsed.group(1) is not None:
            rules.append(_Rule())
        elif parsed.group(2) is not None:
            try:
                pattern = re.compile(parsed.group(2))
            except re.error as exc:
                raise ValueError(f"Invalid rule: `{rule}`: {exc}") from None
            rules.append(_Rule(pattern, parsed.group(3), parsed.group(4) == "L", parsed.group(4) == "U"))
        elif parsed.group(5):
            raise ValueError(f"Invalid rule: `{rule}`")
    return rules


def _expand_java_replacement(replacement: str, match: re.Match) -> str:
    """Java's Matcher.appendReplacement: `$n` group references (greedy while a group exists), `\\c` the
    literal c; a `$n` past the last group is literal (Kafka escapes those)."""
    out: list[str] = []
    i, n = 0, len(replacement)
    groups = match.re.groups
    while i < n:
        ch = replacement[i]
        if ch == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < n and replacement[i + 1].isdigit() and int(replacement[i + 1]) <= groups:
            ref = int(replacement[i + 1])
            i += 2
            while i < n and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups:
                ref = ref * 10 + int(replacement[i])
                i += 1
            out.append(match.group(ref) or "")
        elif ch == "$" and i + 1 < n and replacement[i + 1] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 2:end] if end > 0 else ""
            if end > 0 and name in match.re.groupindex:
                out.append(match.group(name) or "")
                i = end + 1
            else:
                out.append(ch)
                i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def principal_name(dn: str, rules: list[_Rule]) -> str:
    """The principal name of subject `dn` under `rules`: the first rule that applies (SslPrincipalMapper.getName)."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"No rules apply to {dn}")


# RFC 2253 keywords Java's X500Principal.getName() writes; other attributes are OID=#hex
_DN_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
                "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
                "0.9.2342.19200300.100.1.1": "UID"}
_STRING_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x16: "ascii", 0x14: "latin-1", 0x1E: "utf-16-be",
                0x1C: "utf-32-be", 0x12: "ascii", 0x1A: "ascii"}


def _der(data: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, start of content, end of content, end of element) of the DER element at `pos`."""
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length, pos + length


def _oid(data: bytes) -> str:
    first = data[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in data[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _escape_dn_value(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(cert_der: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() (RFC 2253) writes it:
    most specific RDN first, "CN=alice,OU=eng,O=acme"."""
    _, start, _, _ = _der(cert_der, 0)  # Certificate
    _, pos, _, _ = _der(cert_der, start)  # TBSCertificate
    tag, _, _, nxt = _der(cert_der, pos)
    if tag == 0xA0:  # [0] version
        pos = nxt
    for _ in range(4):  # serial, signature algorithm, issuer, validity
        pos = _der(cert_der, pos)[3]
    tag, pos, end, _ = _der(cert_der, pos)  # subject Name: SEQUENCE OF RDN
    rdns = []
    while pos < end:
        _, set_pos, set_end, pos = _der(cert_der, pos)
        attrs = []
        while set_pos < set_end:
            _, a_pos, _, set_pos = _der(cert_der, set_pos)
            _, o_start, o_end, a_pos = _der(cert_der, a_pos)
            oid = _oid(cert_der[o_start:o_end])
            v_tag, v_start, v_end, v_next = _der(cert_der, a_pos)
            keyword = _DN_KEYWORDS.get(oid)
            encoding = _STRING_TAGS.get(v_tag)
            if keyword is not None and encoding is not None:
                attrs.append(f"{keyword}={_escape_dn_value(cert_der[v_start:v_end].decode(encoding, 'replace'))}")
            else:
                attrs.append(f"{keyword or oid}=#{cert_der[a_pos:v_next].hex()}")
        rdns.append("+".join(attrs))
    return ",".join(reversed(rdns))


def peer_principal(ssl_object) -> KafkaPrincipal:
    """The principal of a TLS connection: User:<mapped subject DN> of the client certificate, else
    ANONYMOUS. Raises NoMatchingRule when ssl.principal.mapping.rules maps nothing (Kafka closes)."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    rules = getattr(ssl_object.context, "principal_rules", None) or [_Rule()]
    return KafkaPrincipal.user(principal_name(subject_dn(der), rules))

