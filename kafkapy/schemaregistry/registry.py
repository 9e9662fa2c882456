"""The registry's state and operations: subjects, versions, ids, configs and modes.

The state is only ever changed by `apply`, from the records of the `_schemas` topic (store.py), in
Confluent's key/value JSON:

  SCHEMA          key {"keytype":"SCHEMA","subject":s,"version":v,"magic":1}
                  value {"subject","version","id","schema","schemaType"?,"references"?,"metadata"?,
                         "ruleSet"?,"deleted"} (null: the version was permanently deleted)
  CONFIG          key {"keytype":"CONFIG","subject":s|null,"magic":0}  value {"compatibilityLevel",...}|null
  MODE            key {"keytype":"MODE","subject":s|null,"magic":0}    value {"mode"}|null
  DELETE_SUBJECT  key {"keytype":"DELETE_SUBJECT","subject":s,"magic":0}  value {"subject","version"}:
                  every version up to "version" is soft-deleted
  NOOP            key {"keytype":"NOOP","magic":0}: nothing (written to find the end of the topic)

An operation that changes something checks the request against the current state, appends one
record per change and returns once the reader has applied them (KafkaStore.append), all under one
lock so that two registrations cannot pick the same id or version.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from .errors import RegistryError
from .schemas import SCHEMA_TYPES, InvalidSchema, ParsedSchema, check_compatibility, parse_schema

__all__ = ["Registry", "COMPATIBILITY_LEVELS", "MODES"]

COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_COMPATIBILITY = "BACKWARD"
MAX_VERSION = 2**31 - 1
MAX_REFERENCE_DEPTH = 32
PARSED_CACHE_SIZE = 1000


@dataclass
class SchemaContent:
    """One schema id: the text and what it references (shared by every subject version that has it)."""

    id: int
    schema_type: str
    text: str
    references: list[dict]
    guid: str
    parsed: ParsedSchema | None = field(default=None, repr=False)


@dataclass
class Version:
    subject: str
    version: int
    id: int
    deleted: bool = False
    metadata: dict | None = None
    rule_set: dict | None = None
    ts: int = 0


def _key(schema_type: str, canonical: str, references: list[dict]) -> tuple:
    return (schema_type, canonical, tuple((r.get("name"), r.get("subject"), r.get("version")) for r in references))


class Registry:
    """The registry of one broker; `store` is its KafkaStore (None in unit tests: writes apply directly)."""

    def __init__(self):
        self.store = None
        self.schemas: dict[int, SchemaContent] = {}
        self.by_guid: dict[str, int] = {}
        self.subjects: dict[str, dict[int, Version]] = {}
        self.configs: dict[str | None, dict] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self._by_content: dict[tuple, int] = {}
        self._lock = asyncio.Lock()
        self.counters = {"registered": 0, "lookups": 0, "incompatible": 0}
        # parsed request schemas by their text: serializers look the same schema up again and again
        self._parsed_cache: OrderedDict[tuple, ParsedSchema] = OrderedDict()

    # -- applying records ------------------------------------------------------------------
    def apply(self, key: dict | None, value: dict | None, offset: int = -1) -> None:
        if not isinstance(key, dict):
            return
        keytype = key.get("keytype")
        subject = key.get("subject")
        if keytype == "SCHEMA":
            self._apply_schema(subject, key.get("version"), value)
        elif keytype == "CONFIG":
            if value is None:
                self.configs.pop(subject, None)
            elif isinstance(value, dict):
                self.configs[subject] = value
        elif keytype == "MODE":
            if value is None:
                self.modes.pop(subject, None)
            elif isinstance(value, dict) and value.get("mode") in MODES:
                self.modes[subject] = value["mode"]
        elif keytype == "DELETE_SUBJECT" and isinstance(value, dict):
            upto = value.get("version", MAX_VERSION)
            for version in self.subjects.get(subject, {}).values():
                if version.version <= upto:
                    version.deleted = True
        # NOOP and unknown key types (written by newer registries) change nothing

    def _apply_schema(self, subject: str, version: int, value: dict | None) -> None:
        if not isinstance(subject, str) or not isinstance(version, int):
            return
        versions = self.subjects.setdefault(subject, {})
        if value is None:
            versions.pop(version, None)
            if not versions:
                del self.subjects[subject]
            return
        schema_id = value.get("id")
        if not isinstance(schema_id, int):
            return
        self.max_id = max(self.max_id, schema_id)
        if schema_id not in self.schemas:
            references = value.get("references") or []
            content = SchemaContent(schema_id, value.get("schemaType") or "AVRO", value.get("schema", ""), references,
                                    value.get("guid") or str(uuid.uuid5(uuid.NAMESPACE_OID, f"kafkapy-{schema_id}")))
            self.schemas[schema_id] = content
            self.by_guid[content.guid] = schema_id
        versions[version] = Version(subject, version, schema_id, bool(value.get("deleted")), value.get("metadata"),
                                    value.get("ruleSet"), value.get("ts", 0))

    async def _append(self, key: dict, value: dict | None) -> None:
        if self.store is None:
            self.apply(key, value)
        else:
            from .store import StoreError

            try:
                await self.store.append(key, value)
            except StoreError as exc:
                raise RegistryError.store_error(str(exc)) from None

    # -- reading helpers -------------------------------------------------------------------
    def live_versions(self, subject: str, deleted: bool = False) -> list[Version]:
        return [v for _, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted]

    def subject_list(self, prefix: str = "", deleted: bool = False, deleted_only: bool = False) -> list[str]:
        out = []
        for subject, versions in sorted(self.subjects.items()):
            if not subject.startswith(prefix):
                continue
            live = any(not v.deleted for v in versions.values())
            if deleted_only:
                if not live and versions:
                    out.append(subject)
            elif live or (deleted and versions):
                out.append(subject)
        return out

    def get_version(self, subject: str, version_text, deleted: bool = False) -> Version:
        version = parse_version(version_text)
        if subject not in self.subjects:
            raise RegistryError.subject_not_found(subject)
        if version == -1:
            live = self.live_versions(subject, deleted)
            if not live:
                raise RegistryError.subject_not_found(subject)
            return live[-1]
        found = self.subjects[subject].get(version)
        if found is None or (found.deleted and not deleted):
            raise RegistryError.version_not_found(version)
        return found

    def content(self, schema_id: int) -> SchemaContent:
        found = self.schemas.get(schema_id)
        if found is None:
            raise RegistryError.schema_not_found(f"Schema {schema_id} not found")
        return found

    def version_body(self, version: Version) -> dict:
        content = self.schemas[version.id]
        body = {"subject": version.subject, "version": version.version, "id": version.id, "guid": content.guid}
        body.update(self.schema_body(content))
        if version.metadata is not None:
            body["metadata"] = version.metadata
        if version.rule_set is not None:
            body["ruleSet"] = version.rule_set
        if version.deleted:
            body["deleted"] = True
        if version.ts:
            body["ts"] = version.ts
        return body

    @staticmethod
    def schema_body(content: SchemaContent) -> dict:
        body = {}
        if content.schema_type != "AVRO":
            body["schemaType"] = content.schema_type
        body["schema"] = content.text
        if content.references:
            body["references"] = content.references
        return body

    def referenced_by(self, subject: str, version: int) -> list[int]:
        ids = set()
        for content in self.schemas.values():
            if any(r.get("subject") == subject and r.get("version") == version for r in content.references):
                if any(v.id == content.id and not v.deleted for vs in self.subjects.values() for v in vs.values()):
                    ids.add(content.id)
        return sorted(ids)

    def compatibility_of(self, subject: str | None) -> str:
        for scope in ((subject, None) if subject is not None else (None,)):
            config = self.configs.get(scope)
            if config and config.get("compatibilityLevel"):
                return config["compatibilityLevel"]
        return DEFAULT_COMPATIBILITY

    def normalize_of(self, subject: str | None) -> bool:
        """The `normalize` of the subject's config, else the global one (Confluent's config field)."""
        for scope in ((subject, None) if subject is not None else (None,)):
            config = self.configs.get(scope)
            if config and isinstance(config.get("normalize"), bool):
                return config["normalize"]
        return False

    def mode_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, "READWRITE")

    # -- parsing with references ------------------------------------------------------------
    def parse(self, schema_type: str, text, references: list[dict]) -> ParsedSchema:
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError.invalid_schema(f"Invalid schema type {schema_type}")
        if not isinstance(text, str) or not text:
            raise RegistryError.invalid_schema("Empty schema")
        resolved: list[tuple[str, str, str]] = []
        self._resolve_references(references, resolved, set(), [], 0)
        cache_key = (schema_type, text, tuple(resolved))
        cached = self._parsed_cache.get(cache_key)
        if cached is not None:
            self._parsed_cache.move_to_end(cache_key)
            return cached
        try:
            parsed = parse_schema(schema_type, text, resolved)
        except InvalidSchema as exc:
            raise RegistryError.invalid_schema(str(exc)) from None
        self._parsed_cache[cache_key] = parsed
        if len(self._parsed_cache) > PARSED_CACHE_SIZE:
            self._parsed_cache.popitem(last=False)
        return parsed

    def _resolve_references(self, references, out: list, done: set, stack: list, depth: int) -> None:
        """Depth first, dependencies before their dependants; unknown or cyclic references are 42201."""
        if not isinstance(references, list):
            raise RegistryError.invalid_schema("Invalid schema: references must be a list")
        if depth > MAX_REFERENCE_DEPTH:
            raise RegistryError.invalid_schema("Invalid schema: references nested too deeply")
        for ref in references:
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or \
                    not isinstance(ref.get("subject"), str) or not isinstance(ref.get("version"), int):
                raise RegistryError.invalid_schema(f"Invalid schema: bad reference {ref!r}")
            try:
                version = self.get_version(ref["subject"], ref["version"])
            except RegistryError:
                raise RegistryError.invalid_schema(
                    f"Invalid schema: reference {ref['name']!r} to subject {ref['subject']!r} version "
                    f"{ref['version']} not found") from None
            node = (version.subject, version.version)
            if node in stack:
                raise RegistryError.invalid_schema(f"Invalid schema: circular reference through {ref['subject']!r}")
            if node in done:
                continue
            content = self.schemas[version.id]
            stack.append(node)
            self._resolve_references(content.references, out, done, stack, depth + 1)
            stack.pop()
            done.add(node)
            out.append((ref["name"], content.schema_type, content.text))

    def parsed(self, content: SchemaContent) -> ParsedSchema:
        if content.parsed is None:
            content.parsed = self.parse(content.schema_type, content.text, content.references)
        return content.parsed

    # -- compatibility ---------------------------------------------------------------------
    def compatibility_problems(self, subject: str, new: ParsedSchema, level: str,
                               against: list[Version] | None = None) -> list[str]:
        if level == "NONE":
            return []
        previous = against if against is not None else self.live_versions(subject)
        if not previous:
            return []
        if not level.endswith("_TRANSITIVE"):
            previous = previous[-1:]
        problems: list[str] = []
        for version in reversed(previous):
            old = self.parsed(self.schemas[version.id])
            if level.startswith(("BACKWARD", "FULL")):
                problems += check_compatibility(new, old)
            if level.startswith(("FORWARD", "FULL")):
                problems += check_compatibility(old, new)
            if problems:
                problems.append(f"{{oldSchemaVersion: {version.version}}}, {{oldSchema: '{version.subject}'}}, "
                                f"{{compatibility: '{level}'}}")
                break
        return problems

    # -- operations ------------------------------------------------------------------------
    def lookup(self, subject: str, body: dict, deleted: bool = False) -> dict:
        self.counters["lookups"] += 1
        schema_type, text, references = _schema_fields(body)
        if subject not in self.subjects or not self.live_versions(subject, deleted):
            raise RegistryError.subject_not_found(subject)
        parsed = self.parse(schema_type, text, references)
        wanted = _key(schema_type, parsed.canonical, references)
        for version in reversed(self.live_versions(subject, deleted)):
            content = self.schemas[version.id]
            if content.schema_type == schema_type and \
                    _key(content.schema_type, self.parsed(content).canonical, content.references) == wanted:
                return self.version_body(version)
        raise RegistryError.schema_not_found()

    async def register(self, subject: str, body: dict, normalize: bool = False) -> dict:
        schema_type, text, references = _schema_fields(body)
        metadata, rule_set = body.get("metadata"), body.get("ruleSet")
        wanted_id, wanted_version = body.get("id"), body.get("version")
        for name, value in (("id", wanted_id), ("version", wanted_version)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise RegistryError.unprocessable(f"Invalid {name} {value!r}")
        if wanted_id is not None and wanted_id <= 0:
            wanted_id = None
        if wanted_version is not None and wanted_version <= 0:
            wanted_version = None
        if not isinstance(metadata, (dict, type(None))) or not isinstance(rule_set, (dict, type(None))):
            raise RegistryError.unprocessable("metadata and ruleSet must be objects")
        async with self._lock:
            mode = self.mode_of(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise RegistryError.not_permitted(f"Subject {subject} is in read-only mode")
            parsed = self.parse(schema_type, text, references)
            if normalize or self.normalize_of(subject):
                # Confluent stores the normalized form; equal schemas already compare equal here
                text = parsed.normalized or text
            content_key = _key(schema_type, parsed.canonical, references)
            # the same schema already under this subject: its id, nothing written
            for version in reversed(self.live_versions(subject)):
                content = self.schemas[version.id]
                if _key(content.schema_type, self.parsed(content).canonical, content.references) == content_key \
                        and (metadata is None or metadata == version.metadata) \
                        and (rule_set is None or rule_set == version.rule_set):
                    if wanted_id is not None and wanted_id != version.id:
                        break
                    return self.version_body(version)
            if mode == "IMPORT":
                if wanted_id is None:
                    raise RegistryError.not_permitted(f"Subject {subject} is in import mode: give the schema's id")
                existing = self.schemas.get(wanted_id)
                if existing is not None and _key(existing.schema_type, self.parsed(existing).canonical,
                                                 existing.references) != content_key:
                    raise RegistryError.not_permitted(f"Overwrite new schema with id {wanted_id} is not permitted.")
                schema_id = wanted_id
            else:
                if wanted_id is not None and wanted_id not in self.schemas:
                    raise RegistryError.not_permitted(f"Subject {subject} is not in import mode: ids are assigned "
                                                      f"by the registry")
                level = self.compatibility_of(subject)
                problems = self.compatibility_problems(subject, parsed, level)
                if problems:
                    self.counters["incompatible"] += 1
                    raise RegistryError.incompatible(subject, problems)
                schema_id = self._id_for(content_key) if wanted_id is None else wanted_id
            existing_versions = self.subjects.get(subject, {})
            if wanted_version is not None and mode == "IMPORT":
                if wanted_version in existing_versions:
                    raise RegistryError.not_permitted(f"Version {wanted_version} of subject {subject} exists")
                version = wanted_version
            else:
                version = max(existing_versions, default=0) + 1
            if version > MAX_VERSION:
                raise RegistryError.invalid_version(version)
            if schema_id in self.schemas:
                guid = self.schemas[schema_id].guid
            else:
                guid = str(uuid.uuid4())
            value = {"subject": subject, "version": version, "id": schema_id, "schema": text, "deleted": False}
            if schema_type != "AVRO":
                value["schemaType"] = schema_type
            if references:
                value["references"] = references
            if metadata is not None:
                value["metadata"] = metadata
            if rule_set is not None:
                value["ruleSet"] = rule_set
            value["guid"] = guid
            value["ts"] = int(time.time() * 1000)
            await self._append({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}, value)
            self.counters["registered"] += 1
            return self.version_body(self.subjects[subject][version])

    def _id_for(self, content_key: tuple) -> int:
        """The id of the same schema under another subject, else the next id never handed out."""
        for content in self.schemas.values():
            if _key(content.schema_type, self.parsed(content).canonical, content.references) == content_key:
                return content.id
        return self.max_id + 1

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._lock:
            self._check_writable(subject)
            versions = self.live_versions(subject, deleted=True)
            if not versions:
                raise RegistryError.subject_not_found(subject)
            if permanent:
                if any(not v.deleted for v in versions):
                    raise RegistryError.subject_not_soft_deleted(subject)
                for v in versions:
                    self._check_unreferenced(subject, v.version)
                for v in versions:
                    await self._append({"keytype": "SCHEMA", "subject": subject, "version": v.version, "magic": 1},
                                       None)
                await self._append({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}, None)
                return [v.version for v in versions]
            live = [v for v in versions if not v.deleted]
            if not live:
                raise RegistryError.subject_soft_deleted(subject)
            for v in live:
                self._check_unreferenced(subject, v.version)
            await self._append({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0},
                               {"subject": subject, "version": versions[-1].version})
            return [v.version for v in live]

    async def delete_version(self, subject: str, version_text, permanent: bool) -> int:
        async with self._lock:
            self._check_writable(subject)
            if subject not in self.subjects:
                raise RegistryError.subject_not_found(subject)
            version = self.get_version(subject, version_text, deleted=True) if parse_version(version_text) != -1 \
                else self.get_version(subject, version_text)
            self._check_unreferenced(subject, version.version)
            key = {"keytype": "SCHEMA", "subject": subject, "version": version.version, "magic": 1}
            if permanent:
                if not version.deleted:
                    raise RegistryError.version_not_soft_deleted(subject, version.version)
                await self._append(key, None)
            else:
                if version.deleted:
                    raise RegistryError.version_soft_deleted(subject, version.version)
                value = self.version_body(version)
                value.pop("deleted", None)
                value["deleted"] = True
                await self._append(key, value)
            return version.version

    def _check_writable(self, subject: str) -> None:
        if self.mode_of(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError.not_permitted(f"Subject {subject} is in read-only mode")

    def _check_unreferenced(self, subject: str, version: int) -> None:
        if self.referenced_by(subject, version):
            raise RegistryError.reference_exists(
                f"One or more references exist to the schema {{subject={subject},version={version}}}.")

    async def set_config(self, subject: str | None, body: dict) -> dict:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and (not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS):
            raise RegistryError.invalid_compatibility(level)
        value = {k: v for k, v in body.items() if k not in ("compatibility", "compatibilityLevel")}
        if level is not None:
            value["compatibilityLevel"] = level.upper()
        async with self._lock:
            old = dict(self.configs.get(subject) or {})
            if level is None and old.get("compatibilityLevel"):
                value["compatibilityLevel"] = old["compatibilityLevel"]
            await self._append({"keytype": "CONFIG", "subject": subject, "magic": 0}, old | value)
        answer = {k: v for k, v in value.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in value:
            answer["compatibility"] = value["compatibilityLevel"]
        return answer

    def get_config(self, subject: str | None, default_to_global: bool) -> dict:
        if subject is None:
            return {"compatibilityLevel": DEFAULT_COMPATIBILITY} | self.configs.get(None, {})
        config = self.configs.get(subject)
        if config:
            return dict(config)
        if default_to_global:
            return self.get_config(None, False)
        raise RegistryError.subject_compat_not_configured(subject)

    async def delete_config(self, subject: str | None) -> dict:
        async with self._lock:
            if subject is not None and subject not in self.configs:
                if subject not in self.subjects:
                    raise RegistryError.subject_not_found(subject)
                raise RegistryError.subject_compat_not_configured(subject)
            old = self.get_config(subject, True)
            await self._append({"keytype": "CONFIG", "subject": subject, "magic": 0}, None)
            return old

    async def set_mode(self, subject: str | None, mode, force: bool) -> dict:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError.invalid_mode(mode)
        mode = mode.upper()
        async with self._lock:
            if mode == "IMPORT" and not force:
                has = self.live_versions(subject, True) if subject is not None else self.subjects
                if has:
                    raise RegistryError.not_permitted("Cannot import since found existing subjects")
            await self._append({"keytype": "MODE", "subject": subject, "magic": 0}, {"mode": mode})
        return {"mode": mode}

    def get_mode(self, subject: str | None, default_to_global: bool) -> dict:
        if subject is None:
            return {"mode": self.modes.get(None, "READWRITE")}
        if subject in self.modes:
            return {"mode": self.modes[subject]}
        if default_to_global:
            return {"mode": self.modes.get(None, "READWRITE")}
        raise RegistryError.subject_mode_not_configured(subject)

    async def delete_mode(self, subject: str) -> dict:
        async with self._lock:
            if subject not in self.modes:
                raise RegistryError.subject_mode_not_configured(subject)
            old = self.modes[subject]
            await self._append({"keytype": "MODE", "subject": subject, "magic": 0}, None)
            return {"mode": old}

    def test_compatibility(self, subject: str, version_text, body: dict, verbose: bool) -> dict:
        schema_type, text, references = _schema_fields(body)
        parsed = self.parse(schema_type, text, references)
        level = self.compatibility_of(subject)
        if version_text is None:
            against = self.live_versions(subject)
            if not level.endswith("_TRANSITIVE") and against:
                against = against[-1:]
            level = level.removesuffix("_TRANSITIVE") + "_TRANSITIVE" if level != "NONE" else level
        else:
            parse_version(version_text)
            if subject not in self.subjects or not self.live_versions(subject):
                if parse_version(version_text) == -1:
                    return {"is_compatible": True}
                raise RegistryError.subject_not_found(subject)
            against = [self.get_version(subject, version_text)]
            level = level.removesuffix("_TRANSITIVE") + "_TRANSITIVE" if level != "NONE" else level
        problems = self.compatibility_problems(subject, parsed, level, against)
        answer = {"is_compatible": not problems}
        if verbose:
            answer["messages"] = problems
        return answer


def parse_version(text) -> int:
    """A version path segment: 1..2^31-1, or "latest" / -1 (as -1); anything else is 42202."""
    if isinstance(text, int) and not isinstance(text, bool):
        number = text
    elif isinstance(text, str) and text.lower() == "latest":
        return -1
    else:
        try:
            number = int(text)
        except (TypeError, ValueError):
            raise RegistryError.invalid_version(text) from None
    if number == -1:
        return -1
    if not 1 <= number <= MAX_VERSION:
        raise RegistryError.invalid_version(text)
    return number


def _schema_fields(body) -> tuple[str, str, list]:
    if not isinstance(body, dict):
        raise RegistryError.unprocessable("The request body must be a JSON object")
    text = body.get("schema")
    if text is None:
        raise RegistryError.invalid_schema("Empty schema")
    if not isinstance(text, str):
        raise RegistryError.unprocessable("The schema must be a string")
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise RegistryError.invalid_schema(f"Invalid schema type {schema_type}")
    references = body.get("references") or []
    return schema_type.upper(), text, references
