"""``bench/stress.py`` as a module for the tests (they run its scenarios in short versions)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from conftest import REPO


def _load() -> ModuleType:
    if "stress" in sys.modules:
        return sys.modules["stress"]
    spec = importlib.util.spec_from_file_location("stress", REPO / "bench" / "stress.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stress"] = module
    spec.loader.exec_module(module)
    return module


stress = _load()
