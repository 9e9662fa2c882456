"""Config types and values: Kafka's ConfigDef types, value syntax (parse_value, format_value),
validators, and the definition record (ConfigDef) both config tables are made of (config_defs)."""
from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Any, NamedTuple

from ..metadata.errors import ConfigError


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = sys.float_info.max


class SuperUsers:
    """Validator of `super.users`: principals `User:<name>` separated by ';' (the authorizer's
    parser, imported when a value is checked: a broker without the setting never loads it)."""

    def __call__(self, name: str, value: object) -> None:
        if value is None or not str(value).strip():
            return  # no super users (the default)
        from ..security.authorizer import parse_super_users

        parse_super_users(str(value))

    def __str__(self) -> str:
        return "User:<name>;User:<name>..."


class ConfigType(IntEnum):
    """Config value types; the ids are DescribeConfigs' ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password:
    """A secret config value; prints as [hidden] so it never reaches a log line by accident."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        """Never the value: a password must not reach a log line or a DescribeConfigs answer."""
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# -- value syntax (Kafka's ConfigDef.parseType / convertToString) --------------------------------

_JAVA_TRIM = "".join(chr(c) for c in range(33))  # String.trim() strips every char <= ' '
# patterns compiled (and cached) by `re` on first use: most starts parse no number from text
_INT_RE = r"[+-]?[0-9]+"
_DOUBLE_RE = r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)"
_COMMA = r"\s*,\s*"
_INT_BOUNDS = {ConfigType.INT: (-2**31, 2**31 - 1), ConfigType.SHORT: (-2**15, 2**15 - 1),
               ConfigType.LONG: (-2**63, 2**63 - 1)}


def java_trim(text: str) -> str:
    return text.strip(_JAVA_TRIM)


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """Parse a raw (usually string) value of config `name` into its typed value, as Kafka does."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return _coerce_typed(name, ctype, raw)
    text = java_trim(raw)
    if ctype is ConfigType.BOOLEAN:
        if text.lower() == "true":
            return True
        if text.lower() == "false":
            return False
        raise ConfigError.invalid_value(name, raw, "Expected value to be either true or false")
    if ctype in (ConfigType.STRING, ConfigType.CLASS):
        return text
    if ctype is ConfigType.PASSWORD:
        return Password(text)
    if ctype in _INT_BOUNDS:
        low, high = _INT_BOUNDS[ctype]
        if not re.fullmatch(_INT_RE, text) or not low <= int(text) <= high:
            raise ConfigError.invalid_value(name, raw, f"Not a number of type {ctype.name}")
        return int(text)
    if ctype is ConfigType.DOUBLE:
        if not re.fullmatch(_DOUBLE_RE, text):
            raise ConfigError.invalid_value(name, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    if ctype is ConfigType.LIST:
        return [] if not text else re.split(_COMMA, text)
    return raw


def _coerce_typed(name: str, ctype: ConfigType, value: Any) -> Any:
    """Accept already-typed values (defaults in the table, values given by code)."""
    ok = {
        ConfigType.BOOLEAN: isinstance(value, bool),
        ConfigType.INT: isinstance(value, int) and not isinstance(value, bool),
        ConfigType.SHORT: isinstance(value, int) and not isinstance(value, bool),
        ConfigType.LONG: isinstance(value, int) and not isinstance(value, bool),
        ConfigType.DOUBLE: isinstance(value, (int, float)) and not isinstance(value, bool),
        ConfigType.LIST: isinstance(value, (list, tuple)),
        ConfigType.PASSWORD: isinstance(value, Password),
    }.get(ctype, False)
    if not ok:
        raise ConfigError.invalid_value(name, value, f"Expected a value of type {ctype.name}")
    if ctype is ConfigType.DOUBLE:
        return float(value)
    if ctype is ConfigType.LIST:
        return [str(v) for v in value]
    return value


def java_double_str(value: float) -> str:
    """Java's Double.toString: '0.5', '1.0', '1.0E10', '1.7976931348623157E308'."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    # The shortest repr's significant digits and exponent (what Decimal(repr(v)).as_tuple() gives)
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole_part, _, frac_part = mantissa.partition(".")
    significant = (whole_part + frac_part).lstrip("0") or "0"
    digits_tuple, exponent = significant, int(exp or 0) - len(frac_part)
    digits = significant.rstrip("0") or "0"
    point = len(digits_tuple) + exponent  # position of the decimal point within the digit string
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole = digits[:point].ljust(point, "0")
        frac = digits[point:] or "0"
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def format_value(ctype: ConfigType, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString: the string DescribeConfigs reports for a typed value."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.DOUBLE:
        return java_double_str(float(value))
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.PASSWORD:
        return "[hidden]"
    return str(value)


# -- validators ----------------------------------------------------------------------------------

# The validators and definitions below are NamedTuples and plain classes, not dataclasses: every
# broker start builds these tables before its first answer, and a frozen dataclass costs about a
# millisecond to create (generated code compiled at import), a NamedTuple a tenth of that.

class Range(NamedTuple):
    """Kafka's Range.atLeast / Range.between."""

    min: float | None = None
    max: float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid_value(name, None, "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigError.invalid_value(name, _shown(value), f"Value must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise ConfigError.invalid_value(name, _shown(value), f"Value must be no more than {_num(self.max)}")

    def __str__(self) -> str:
        if self.max is None:
            return f"[{_num(self.min)},...]"
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


class OneOf(NamedTuple):
    """Kafka's ValidString.in (or CaseInsensitiveValidString)."""

    choices: tuple[str, ...]
    case_insensitive: bool = False

    def __call__(self, name: str, value: Any) -> None:
        ok = (value.upper() in {c.upper() for c in self.choices}) if self.case_insensitive \
            else value in self.choices
        if not ok:
            raise ConfigError.invalid_value(name, value, "String must be one of: " + ", ".join(self.choices))

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


class EachOneOf(NamedTuple):
    """Kafka's ValidList.in: every list element must be one of the choices (an empty list is fine)."""

    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        for item in value:
            OneOf(self.choices)(name, item)

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


class _Stateless:
    """A validator without parameters: all instances of a class are equal."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GzipLevel(_Stateless):
    """gzip levels: 1..9, or -1 for zlib's default."""

    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        if value > 9 or (value < 1 and value != -1):
            raise ConfigError.invalid_value(name, value, "Value must be between 1 and 9 or equal to -1")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


class ThrottledReplicas(_Stateless):
    """'*' or a list of partitionId:brokerId pairs (Kafka's ThrottledReplicaListValidator)."""

    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        # Kafka's check, empty elements included ("0:1," is valid) and '*' spelled by all of them
        items = [java_trim(v) for v in value]
        if all(re.fullmatch(r"([0-9]+:[0-9]+)?", v) for v in items) or "".join(items) == "*":
            return
        # the value as Java prints a List
        raise ConfigError.invalid_value(name, "[" + ", ".join(value) + "]", f"{name} must be the literal '*' or a "
                                        "list of replicas in the following format: "
                                        "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


class MetadataVersion(_Stateless):
    """A Kafka release/IBP version string such as 0.10.0, 2.8, 3.0-IV1, 3.9-IV0."""

    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        if not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?(\.[0-9]+)?(-IV[0-9]+)?", value or ""):
            raise ConfigError.invalid_value(name, value, "Not a valid metadata version")

    def __str__(self) -> str:
        return "[0.8.0, ..., 3.9-IV0]"


class NonNull(_Stateless):
    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid_value(name, None, "entry must be non null")

    def __str__(self) -> str:
        return "non-null string"


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


def _shown(value: Any) -> str:
    return java_double_str(value) if isinstance(value, float) else str(value)


Validator = Callable[[str, Any], None]


def _ip_count_map(name: str, value: Any) -> None:
    """max.connections.per.ip.overrides: comma-separated host:count (Kafka's getMap + count >= 0)."""
    for entry in (value or "").split(","):
        if not entry.strip():
            continue
        host, sep, count = entry.strip().rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError.invalid_value(name, value, f"Invalid entry {entry.strip()!r}: expected host:count "
                                            "with a count of at least 0")


def _http_listener(name: str, value: Any) -> None:
    """kafkapy.metrics.listener, kafkapy.console.listener: http://host:port (kafkapy/metrics/http_endpoint.py
    parses it)."""
    if value:
        from ..metrics.http_endpoint import parse_listener_url

        try:
            parse_listener_url(value)
        except ValueError as exc:
            raise ConfigError.invalid_value(name, value, str(exc)) from None


def _registry_listener(name: str, value: Any) -> None:
    """kafkapy.schema.registry.listener: http://host:port or https://host:port."""
    if value:
        text = str(value).strip()
        _http_listener(name, "http://" + text[len("https://"):] if text.lower().startswith("https://") else text)


def _iceberg_catalog_uri(name: str, value: Any) -> None:
    """kafkapy.iceberg.catalog.uri: a SQLAlchemy URL of a SQL catalog or a REST catalog's http(s) URL."""
    scheme = str(value).split(":", 1)[0].lower() if ":" in str(value) else ""
    if scheme.split("+", 1)[0] not in ("sqlite", "postgresql", "http", "https"):
        raise ConfigError.invalid_value(name, value, "must be a sqlite:///, postgresql:// (SQL catalog) or "
                                        "http(s):// (REST catalog) URI")


def _registry_authentication(name: str, value: Any) -> None:
    if value not in ("none", "basic"):
        raise ConfigError.invalid_value(name, value, "Expected 'none' or 'basic'")


# -- definitions ---------------------------------------------------------------------------------

class BrokerSynonym(NamedTuple):
    """A broker config that supplies a topic config's default; values are multiplied by `to_ms`."""

    name: str
    to_ms: int = 1


class ConfigDef(NamedTuple):
    """One config: Kafka name, type, default (typed), validator, importance, documentation.

    Topic configs list their broker `synonyms` in Kafka's priority order. Broker configs say whether
    they can be changed at runtime (`dynamic`, `per_broker` = only for one broker, not as a cluster
    default), whether kafkapy acts on them (`used`; unused ones are accepted and warned about when
    set) and whether they are `internal` (accepted, never described).
    """

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    doc: str
    validator: Validator | None = None
    synonyms: tuple[BrokerSynonym, ...] = ()
    dynamic: bool = False
    per_broker: bool = False
    used: bool = True
    internal: bool = False

    def parse(self, raw: Any) -> Any:
        """Parse and validate a raw value for this config (raises ConfigError naming the key)."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value

    def format(self, value: Any) -> str | None:
        return format_value(self.type, value)


H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
B, S, I, SH, LG, D, LS, C, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT,
                               ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS,
                               ConfigType.PASSWORD)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
ICEBERG_MODES = ("disabled", "key_value", "value_schema_id_prefix")


def _syn(*names: str) -> tuple[BrokerSynonym, ...]:
    units = {"hours": 3_600_000, "minutes": 60_000}
    return tuple(BrokerSynonym(n, units.get(n.rsplit(".", 1)[-1], 1)) for n in names)


def _table(*defs: ConfigDef) -> dict[str, ConfigDef]:
    table = {d.name: d for d in defs}
    assert len(table) == len(defs), "duplicate config name in table"
    # That every default satisfies its own validator is checked by tests/broker/test_config_defs.py,
    # not at each import: the broker's start-up reads this table.
    return table


def T(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
      synonyms: tuple[str, ...] = (), importance: Importance = M) -> ConfigDef:
    return ConfigDef(name, ctype, default, importance, doc, validator, _syn(*synonyms))
