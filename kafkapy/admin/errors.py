"""The errors the admin commands end with: each is one line for stderr and an exit code."""
from __future__ import annotations

from ..protocol.error_codes import ErrorCode

__all__ = ["CliError", "KafkaApiError", "UnreachableError", "error_name", "EXIT_KAFKA", "EXIT_USAGE",
           "EXIT_UNREACHABLE"]

EXIT_KAFKA = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

# what to do about the errors an operator meets most often
_HINTS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "list topics with `kafkapy topics list`",
    ErrorCode.TOPIC_ALREADY_EXISTS: "pick another name, or pass --if-not-exists",
    ErrorCode.INVALID_PARTITIONS: "give --partitions a positive number",
    ErrorCode.INVALID_REPLICATION_FACTOR: "give --replication-factor at most the number of brokers",
    ErrorCode.INVALID_CONFIG: "check the config name and value (`kafkapy configs describe`)",
    ErrorCode.GROUP_ID_NOT_FOUND: "list groups with `kafkapy groups list`",
    ErrorCode.NON_EMPTY_GROUP: "stop the group's consumers first",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "ask for an ACL on the topic",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "ask for an ACL on the group",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ask for an ACL on the cluster",
    ErrorCode.SECURITY_DISABLED: "the broker has no authorizer (set authorizer.class.name)",
    ErrorCode.UNSUPPORTED_VERSION: "the broker is too old for this command",
    ErrorCode.POLICY_VIOLATION: "the broker's policy refuses this change",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "topic names use [a-zA-Z0-9._-], at most 249 characters",
    ErrorCode.TOPIC_DELETION_DISABLED: "the broker has delete.topic.enable=false",
}


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


class CliError(Exception):
    """Ends the command with `message` on stderr (prefixed "error: ") and `exit_code`."""

    exit_code = EXIT_KAFKA

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class KafkaApiError(CliError):
    """The broker answered with a Kafka error code."""

    def __init__(self, code: int, what: str, hint: str | None = None, detail: str | None = None):
        self.code = code
        hint = hint if hint is not None else _HINTS.get(code)
        text = f"{what} ({error_name(code)}{': ' + detail if detail else ''})"
        super().__init__(text + (f"; {hint}" if hint else ""))


class UnreachableError(CliError):
    """No broker answered."""

    exit_code = EXIT_UNREACHABLE
