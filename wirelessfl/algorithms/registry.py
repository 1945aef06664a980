"""Algorithms by name, torch-free: each one's ``AlgorithmSpec`` now, its implementation class when a run needs it.

Validation, ``wirelessfl list`` and the memory estimate read specs only, so
they answer without loading torch; :func:`implementation` imports a built-in's
module (``spec.implementation``) the first time a run builds it. A user's
algorithm by ``package.module:Class`` is imported to read the ``spec`` on its
class (importing runs its code, as any import does).
"""

from __future__ import annotations

import importlib
from typing import Any

from wirelessfl.algorithms.spec import AlgorithmSpec
from wirelessfl.algorithms.specs import BUILT_INS
from wirelessfl.user_code import import_user_module, split_import_path

#: name -> spec of every algorithm known by name: the built-ins, and classes registered by ``base.register``
SPECS: dict[str, AlgorithmSpec] = dict(BUILT_INS)


def add(spec: AlgorithmSpec) -> None:
    """Make ``spec`` known by its name (``base.register`` calls it for a registered class)."""
    SPECS[spec.name] = spec


def unknown_message(name: str) -> str:
    return f"unknown algorithm {name!r}; allowed: {', '.join(sorted(SPECS))} or 'package.module:Class'"


def spec_of(name: str) -> AlgorithmSpec:
    """The spec of a known algorithm, or of a user's class by ``package.module:Class`` (imported); one
    ``ValueError`` line when there is none."""
    if ":" in name:
        return import_algorithm(name).spec
    if name not in SPECS:
        raise ValueError(unknown_message(name))
    return SPECS[name]


def implementation(name: str) -> Any:
    """The class that trains algorithm ``name`` (a built-in's module imported on first use)."""
    if ":" in name:
        return import_algorithm(name)
    module, attribute = spec_of(name).implementation.split(":")
    return getattr(importlib.import_module(module), attribute)


def import_algorithm(path: str) -> Any:
    """The algorithm class ``package.module:Class`` names, imported through ``user_code``.

    Refused in one line naming the path: a module that cannot be imported (its
    own error quoted), a missing attribute, something that is not a subclass of
    ``Algorithm`` (every subclass carries a ``spec``), a class leaving one of
    ``plan``/``step``/``client_params`` undefined, and a class whose ``name`` is a
    built-in's (its messages and plans would pass for that one's).
    """
    parts = split_import_path(path)
    if parts is None:
        raise ValueError(f"algorithm {path!r}: an algorithm by import path is written 'package.module:Class'")
    module_name, attribute = parts
    try:
        target: Any = import_user_module(module_name)
    except Exception as err:  # the user's module may raise anything while importing
        raise ValueError(f"algorithm {path!r}: cannot import module {module_name!r} ({type(err).__name__}: {_first_line(err)})") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"algorithm {path!r}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not (isinstance(target, type) and isinstance(getattr(target, "spec", None), AlgorithmSpec)):
        kind = f"the class {target.__qualname__}" if isinstance(target, type) else f"a {type(target).__name__}"
        raise ValueError(f"algorithm {path!r}: {attribute} is {kind}, not a subclass of wirelessfl.algorithms.Algorithm")
    missing = sorted(getattr(target, "__abstractmethods__", ()))
    if missing:
        raise ValueError(f"algorithm {path!r}: {attribute} does not define {', '.join(missing)} (abstract in Algorithm)")
    if target.name in SPECS and SPECS[target.name].implementation != f"{target.__module__}:{target.__qualname__}":
        owner = SPECS[target.name].implementation.split(":")[-1]
        raise ValueError(
            f"algorithm {path!r}: {attribute}.name is {target.name!r}, the name of the built-in "
            f"{owner}; give the class a name of its own"
        )
    return target


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.split("\n")[0].rstrip("\r") if text else "(no message)"
