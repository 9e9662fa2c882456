"""Confluent Schema Registry's error answers: an HTTP status and a body {"error_code", "message"}."""
from __future__ import annotations

__all__ = ["InvalidSchema", "RegistryError"]


class InvalidSchema(Exception):
    """A schema that does not parse (schemas.py, protocompat.py); the registry answers it with
    RegistryError.invalid_schema."""


class RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}

    # the codes of io.confluent.kafka.schemaregistry.rest.exceptions.Errors
    @classmethod
    def subject_not_found(cls, subject: str) -> RegistryError:
        return cls(404, 40401, f"Subject '{subject}' not found.")

    @classmethod
    def version_not_found(cls, version) -> RegistryError:
        return cls(404, 40402, f"Version {version} not found.")

    @classmethod
    def schema_not_found(cls, detail: str = "Schema not found") -> RegistryError:
        return cls(404, 40403, detail)

    @classmethod
    def subject_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")

    @classmethod
    def subject_not_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")

    @classmethod
    def version_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
                               f"delete permanently")

    @classmethod
    def version_not_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                               f"permanently deleted")

    @classmethod
    def subject_compat_not_configured(cls, subject: str) -> RegistryError:
        return cls(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")

    @classmethod
    def subject_mode_not_configured(cls, subject: str) -> RegistryError:
        return cls(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")

    @classmethod
    def incompatible(cls, subject: str, details: list[str]) -> RegistryError:
        return cls(409, 409, f"Schema being registered is incompatible with an earlier schema for subject "
                             f"\"{subject}\", details: [{', '.join(details)}]")

    @classmethod
    def invalid_schema(cls, message: str) -> RegistryError:
        return cls(422, 42201, message)

    @classmethod
    def invalid_version(cls, version) -> RegistryError:
        return cls(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values are "
                               f"between [1, 2^31-1] and the string \"latest\"")

    @classmethod
    def invalid_compatibility(cls, level) -> RegistryError:
        return cls(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                               "backward_transitive, forward_transitive, and full_transitive")

    @classmethod
    def invalid_mode(cls, mode) -> RegistryError:
        return cls(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT")

    @classmethod
    def not_permitted(cls, message: str) -> RegistryError:
        return cls(422, 42205, message)

    @classmethod
    def reference_exists(cls, message: str) -> RegistryError:
        return cls(422, 42206, message)

    @classmethod
    def unprocessable(cls, message: str) -> RegistryError:
        return cls(422, 422, message)

    @classmethod
    def bad_request(cls, message: str) -> RegistryError:
        return cls(400, 400, message)

    @classmethod
    def store_error(cls, message: str) -> RegistryError:
        return cls(500, 50001, f"Error in the backend datastore: {message}")

    @classmethod
    def timeout(cls, message: str) -> RegistryError:
        return cls(500, 50002, f"Operation timed out: {message}")

    @classmethod
    def forwarding(cls, message: str) -> RegistryError:
        return cls(500, 50003, f"Error while forwarding the request to the leader: {message}")
