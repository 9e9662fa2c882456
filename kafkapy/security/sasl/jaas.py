"""The `sasl.jaas.config` value: `<LoginModule class> <flag> key="value" ...;`, as Kafka's JaasConfig
reads it (one login module per config value)."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["JaasLoginModule", "parse_jaas_config", "plain_users"]

_FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True, slots=True)
class JaasLoginModule:
    """One login module entry and its options."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str):
    """Words, quoted strings (with backslash escapes), '=' and ';'. Errors never quote values."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "=;":
            yield ch, ch
            i += 1
        elif ch == '"':
            out = []
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(text[i])
                i += 1
            if i >= n:
                raise ValueError("sasl.jaas.config: unterminated quoted value")
            i += 1
            yield "quoted", "".join(out)
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            yield "word", text[start:i]


def parse_jaas_config(text: str) -> JaasLoginModule:
    """Parse a sasl.jaas.config value; ValueError (without the secrets) when it is malformed."""
    tokens = list(_tokens(text))
    modules: list[JaasLoginModule] = []
    pos = 0
    while pos < len(tokens):
        if pos + 1 >= len(tokens) or tokens[pos][0] != "word" or tokens[pos + 1][0] != "word":
            raise ValueError("sasl.jaas.config: expected '<LoginModule> <flag>'")
        class_name, flag = tokens[pos][1], tokens[pos + 1][1].lower()
        if flag not in _FLAGS:
            raise ValueError(f"sasl.jaas.config: invalid login module control flag {tokens[pos + 1][1][:32]!r}")
        pos += 2
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            if (pos + 2 >= len(tokens) or tokens[pos][0] != "word" or tokens[pos + 1][0] != "="
                    or tokens[pos + 2][0] not in ("word", "quoted")):
                raise ValueError("sasl.jaas.config: expected key=value options")
            options[tokens[pos][1]] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise ValueError("sasl.jaas.config: the login module entry does not end with ';'")
        pos += 1
        modules.append(JaasLoginModule(class_name, flag, options))
    if len(modules) != 1:
        raise ValueError(f"sasl.jaas.config: contains {len(modules)} login modules, should be 1 module")
    return modules[0]


def plain_users(module: JaasLoginModule) -> dict[str, str]:
    """PLAIN's users: `user_<name>="<password>"` options (Kafka's PlainServerCallbackHandler)."""
    return {key[5:]: value for key, value in module.options.items() if key.startswith("user_")}
