"""Names a package offers that load their module only when first used (PEP 562), so that
importing the package, or a light module inside it, does not load torch or pandas."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def on_first_use(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package`: `homes` maps each such name to the
    submodule that defines it; the value is kept in the package once loaded."""
    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{homes[name]}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
