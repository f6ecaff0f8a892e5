"""gpustack extensions to moto's server.

Every public module in this package (name not starting with ``_``) is an extension for one API
family. ``load_all()`` imports them in name order; a module may define:

* ``install() -> None``: patch moto in-process (add actions, models, ...). Called once, before the
  server starts serving.
* ``wrap_wsgi(app) -> app``: wrap the WSGI application (middleware). Wrappers are applied in
  module-name order, so a later name ends up outside an earlier one.

To add an API family, drop a new module here (e.g. ``capacity_reservations.py``) with an
``install()``; ``_ec2.py`` has the helpers to register EC2 query actions.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Callable

_loaded: list[ModuleType] = []


def load_all() -> list[ModuleType]:
    """Import and install every extension module once; returns them in load order."""
    if _loaded:
        return list(_loaded)
    names = sorted(
        m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")
    )
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        install: Callable[[], None] | None = getattr(module, "install", None)
        if install is not None:
            install()
        _loaded.append(module)
    return list(_loaded)


def wrap_wsgi(app: Any) -> Any:
    """Apply every loaded extension's ``wrap_wsgi`` to ``app``."""
    for module in load_all():
        wrap = getattr(module, "wrap_wsgi", None)
        if wrap is not None:
            app = wrap(app)
    return app
