"""The mTLS principal: a certificate's subject DN as Java's X500Principal writes it (RFC 2253) and
ssl.principal.mapping.rules as Kafka's SslPrincipalMapper applies them."""
from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.security.tls import NoMatchingRule, parse_mapping_rules, principal_name, subject_dn

DN = "CN=alice,OU=eng,O=acme,C=US"


def names(rules: str, dn: str = DN) -> str:
    return principal_name(dn, parse_mapping_rules(rules))


# -- Kafka's SslPrincipalMapperTest cases ------------------------------------------------------------

@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules_parse(rules):
    parse_mapping_rules(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/L",
    "RULE:CN=(.*?),OU=ServiceUsers.*/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/LU",
])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(ValueError):
        parse_mapping_rules(rules)


def test_kafka_mapper_examples():
    rules = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
             "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,"
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
             "DEFAULT")
    assert names(rules, "CN=Duke,OU=ServiceUsers,O=Org,C=US") == "Duke"
    assert names(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert names(rules, "cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert names(rules, "cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert names(rules, "OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_rules_spread_over_lines_and_commas():
    rules = "RULE:^CN=([a-z]+),OU=eng.*$/$1/L ,\n  RULE:^CN=([a-z]+).*$/other-$1/, DEFAULT"
    assert names(rules) == "alice"
    assert names(rules, "CN=bob,OU=ops,O=acme") == "other-bob"
    assert names(rules, "O=acme") == "O=acme"


def test_no_matching_rule_fails():
    with pytest.raises(NoMatchingRule):
        names("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", DN)


def test_java_replacement_syntax():
    assert names(r"RULE:^CN=(\w+),OU=(\w+).*$/$2\$$1/") == "eng$alice"
    assert names(r"RULE:^CN=(\w+).*$/$9-$1/") == "$9-alice"  # a reference past the last group is literal
    assert names(r"RULE:^CN=(?P<who>\w+).*$/${who}!/") == "alice!"
    assert names(r"RULE:^CN=(.*?)\/x,.*$/$1/, DEFAULT", "CN=a/x,O=b") == "a"


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 =,.-", max_size=40))
def test_default_is_identity(dn):
    assert principal_name(dn, parse_mapping_rules("DEFAULT")) == dn
    assert principal_name(dn, parse_mapping_rules(None)) == dn


@given(st.from_regex(r"[a-z][a-z0-9]{0,11}", fullmatch=True), st.from_regex(r"[a-z]{1,8}", fullmatch=True),
       st.sampled_from(["", "L", "U"]))
def test_cn_extraction_with_case(cn, ou, case):
    dn = f"CN={cn.upper() if case == 'L' else cn},OU={ou},O=acme"
    got = principal_name(dn, parse_mapping_rules(f"RULE:^CN=([^,]+),OU=([^,]+).*$/$1.$2/{case}"))
    expected = f"{cn.upper() if case == 'L' else cn}.{ou}"
    assert got == {"L": expected.lower(), "U": expected.upper(), "": expected}[case]


# -- subject DN ------------------------------------------------------------------------------------

cryptography = pytest.importorskip("cryptography")


def _cert_der(attrs) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(attrs)
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(12345).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def test_subject_dn_is_rfc2253_most_specific_first():
    from cryptography.x509 import NameAttribute
    from cryptography.x509.oid import NameOID

    der = _cert_der([NameAttribute(NameOID.COUNTRY_NAME, "US"), NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                     NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                     NameAttribute(NameOID.COMMON_NAME, "alice")])
    assert subject_dn(der) == "CN=alice,OU=eng,O=acme,C=US"


def test_subject_dn_escapes_and_unknown_attributes():
    from cryptography.x509 import NameAttribute
    from cryptography.x509.oid import NameOID

    der = _cert_der([NameAttribute(NameOID.ORGANIZATION_NAME, "acme, inc"),
                     NameAttribute(NameOID.EMAIL_ADDRESS, "a@b"),
                     NameAttribute(NameOID.COMMON_NAME, "#alice+ ")])
    # Java: X500Principal.getName() -> unknown keywords as OID=#<DER hex>; RFC 2253 escapes
    assert subject_dn(der) == r"CN=\#alice\+\ ,1.2.840.113549.1.9.1=#1603614062,O=acme\, inc"


@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 -_.@", min_size=1, max_size=12)
                .filter(lambda s: s.strip() == s), min_size=1, max_size=4))
def test_subject_dn_round_trips_common_names(values):
    from cryptography.x509 import NameAttribute
    from cryptography.x509.oid import NameOID

    der = _cert_der([NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, v) for v in values])
    assert subject_dn(der) == ",".join(f"OU={v}" for v in reversed(values))
