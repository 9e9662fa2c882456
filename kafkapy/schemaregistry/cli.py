"""`kafkapy schemas list|get|register|delete|compat`: the schema registry's REST API from the shell.

Plain urllib, imported when a schemas command runs (no client library): each command is one or two requests. Answers are printed as
JSON; an error answer prints Confluent's "error_code: message" on stderr and exits 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["add_schemas_command", "run_schemas"]

URL_ENV = "KAFKAPY_SCHEMA_REGISTRY_URL"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def add_schemas_command(commands) -> None:
    schemas = commands.add_parser("schemas", help="the built-in schema registry: list, get, register, delete, compat",
                                  description="Talk to a schema registry (kafkapy's or Confluent's) over its REST API.")
    schemas.add_argument("--url", default=os.environ.get(URL_ENV, "http://127.0.0.1:8081"),
                         help=f"registry URL (default ${URL_ENV} or http://127.0.0.1:8081)")
    verbs = schemas.add_subparsers(dest="schemas_verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="subjects, or one subject's versions")
    listing.add_argument("subject", nargs="?")
    listing.add_argument("--prefix", default="", help="only subjects starting with this")
    listing.add_argument("--deleted", action="store_true", help="include soft-deleted subjects and versions")
    get = verbs.add_parser("get", help="a subject's version (default latest), or a schema by --id")
    get.add_argument("subject", nargs="?")
    get.add_argument("--version", default="latest")
    get.add_argument("--id", type=int, help="the schema with this id")
    get.add_argument("--schema-only", action="store_true", help="print only the schema text")
    for name, text in (("register", "register a schema under a subject"),
                       ("compat", "test a schema against a subject's version (default: as registering would)")):
        verb = verbs.add_parser(name, help=text)
        verb.add_argument("subject")
        verb.add_argument("file", help="schema file, - for stdin")
        verb.add_argument("--type", default="AVRO", type=str.upper, choices=("AVRO", "JSON", "PROTOBUF"))
        verb.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
                          help="a referenced schema (repeatable)")
        if name == "compat":
            verb.add_argument("--version", help="test against this version only (default: every version the "
                                                "compatibility level covers)")
    delete = verbs.add_parser("delete", help="soft-delete a subject or one version (--permanent after a soft delete)")
    delete.add_argument("subject")
    delete.add_argument("--version")
    delete.add_argument("--permanent", action="store_true")
    schemas.set_defaults(schemas_command=True)


def _request(url: str, method: str = "GET", body: dict | None = None):
    import urllib.error
    import urllib.request  # here: the other commands' parser set-up does not pay for it
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            answer = json.loads(raw)
            message = f"{answer.get('error_code')}: {answer.get('message')}"
        except (ValueError, AttributeError):
            message = f"HTTP {exc.code}: {raw[:200]!r}"
        raise SystemExit(_fail(message))
    except (urllib.error.URLError, OSError) as exc:
        raise SystemExit(_fail(f"cannot reach the schema registry at {url}: {exc}"))
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode()


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _schema_body(args) -> dict:
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as exc:
        raise SystemExit(_fail(f"cannot read {args.file}: {exc}"))
    body = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    references = []
    for item in args.reference:
        name, sep, rest = item.partition("=")
        subject, sep2, version = rest.rpartition(":")
        if not sep or not sep2 or not version.lstrip("-").isdigit():
            raise SystemExit(_fail(f"bad --reference {item!r}: expected NAME=SUBJECT:VERSION"))
        references.append({"name": name, "subject": subject, "version": int(version)})
    if references:
        body["references"] = references
    return body


def run_schemas(args: argparse.Namespace) -> int:
    import urllib.parse
    base = args.url.rstrip("/")
    quote = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
    verb = args.schemas_verb
    if verb == "list":
        deleted = "true" if args.deleted else "false"
        if args.subject:
            answer = _request(f"{base}/subjects/{quote(args.subject)}/versions?deleted={deleted}")
        else:
            answer = _request(f"{base}/subjects?deleted={deleted}&subjectPrefix={quote(args.prefix)}")
    elif verb == "get":
        if args.id is not None:
            answer = _request(f"{base}/schemas/ids/{args.id}")
        elif args.subject:
            answer = _request(f"{base}/subjects/{quote(args.subject)}/versions/{quote(str(args.version))}")
        else:
            return _fail("give a subject or --id")
        if args.schema_only:
            print(answer["schema"])
            return 0
    elif verb == "register":
        answer = _request(f"{base}/subjects/{quote(args.subject)}/versions", "POST", _schema_body(args))
    elif verb == "compat":
        path = f"/versions/{quote(args.version)}" if args.version else "/versions"
        answer = _request(f"{base}/compatibility/subjects/{quote(args.subject)}{path}?verbose=true", "POST",
                          _schema_body(args))
        print(json.dumps(answer, indent=2))
        return 0 if answer.get("is_compatible") else 3
    else:  # delete
        permanent = "true" if args.permanent else "false"
        path = f"/versions/{quote(args.version)}" if args.version else ""
        answer = _request(f"{base}/subjects/{quote(args.subject)}{path}?permanent={permanent}", "DELETE")
    print(json.dumps(answer, indent=2))
    return 0
