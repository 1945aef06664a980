"""The one place wirelessfl imports code a scenario names by import path.

A scenario may name a user's model factory (``model: {name: "pkg.mod:factory"}``),
a user's algorithm class (``algorithms: [{name: "pkg.mod:Class"}]``) or a user's
dataset loader (``data: {dataset: "pkg.mod:loader"}``).
Importing such a module runs its code, so every such import goes through
:func:`import_user_module`: a policy on when user code may run (for instance,
not before a resumed run's checkpoints are checked) is one change here.
This module imports neither torch nor simpy.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def split_import_path(path: str) -> tuple[str, str] | None:
    """``("package.module", "attribute")`` for ``"package.module:attribute"``; None for anything else."""
    if not isinstance(path, str) or path.count(":") != 1:
        return None
    module, attribute = path.split(":")
    if not module or not attribute:
        return None
    return module, attribute


def import_user_module(name: str) -> ModuleType:
    """Import the user's module ``name`` (its own exceptions propagate; callers word them in one line)."""
    return importlib.import_module(name)
