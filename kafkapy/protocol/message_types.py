"""The api key -> message class tables of the generated messages package, filled on first lookup."""
from __future__ import annotations

from importlib import import_module

__all__ = ["MessageTypes"]


class MessageTypes(dict):
    """api key -> the request (or response) class of every API, each imported on its first lookup.

    A broker answers its first requests (ApiVersions, Metadata) long before it needs most of the
    80-odd APIs, and importing every message module up front was a large part of its start-up.
    Looking up a class already imported is a plain dict lookup (the path of every request); the
    first lookup of an API imports its module (`__missing__`) and stores the class. Membership,
    length and iteration answer from the table of modules without importing anything; `get`,
    `values` and `items` see every API, importing what they must.
    """

    __slots__ = ("_package", "_modules", "_complete")

    def __init__(self, package: str, modules: dict[int, tuple[str, str]]):
        """`modules`: api key -> (module name within `package`, class name), in api key order."""
        super().__init__()
        self._package = package
        self._modules = modules
        self._complete = False

    def __missing__(self, api_key: int) -> type:
        module, name = self._modules[api_key]  # KeyError for an api key without messages
        cls = getattr(import_module(f"{self._package}.{module}"), name)
        self[api_key] = cls
        return cls

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __repr__(self) -> str:
        """Counts instead of the module table and the completeness flag (_modules, _complete):
        the table holds every API's module name."""
        return f"MessageTypes({self._package!r}, {len(self)} APIs, {dict.__len__(self)} imported)"

    def get(self, api_key: int, default=None):
        try:
            return self[api_key]
        except KeyError:
            return default

    def keys(self):
        return self._modules.keys()

    def class_names(self) -> dict[int, str]:
        """api key -> class name, without importing anything."""
        return {api_key: name for api_key, (_, name) in self._modules.items()}

    def values(self):
        self._import_all()
        return dict.values(self)

    def items(self):
        self._import_all()
        return dict.items(self)

    def _import_all(self) -> None:
        if not self._complete:
            classes = {api_key: self[api_key] for api_key in self._modules}
            dict.clear(self)  # refilled in api key order, whatever order the lookups came in
            dict.update(self, classes)
            self._complete = True
