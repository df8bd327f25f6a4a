"""A package's names imported from its modules when first asked for (PEP 562's module
`__getattr__`), so that a run imports only what it uses: `formats` its codecs, `sources` its
readers."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package` that imports each name of `modules` from the package's
    module it names (`{"OpenAIFormat": "openai"}`) when the name is first asked for."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
