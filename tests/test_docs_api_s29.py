"""docs/api.md against the package (review session 29): every public name documented,
every `md_cg.X` it names there, the return types importable from md_cg, and
``md_cg.migrate`` the function whatever was imported first."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import md_cg
from md_cg.sample import bundled_sample_path

ENV = dict(os.environ, PYTHONPATH=str(REPO))
API = (REPO / "docs" / "api.md").read_text(encoding="utf-8")


def flat(text: str) -> str:
    return " ".join(text.split())


# -- md_cg.migrate: the function, whatever was imported first --------------------------------

ORDERS = {
    "module first": "from md_cg.migrate import verify_migration\nfrom md_cg import migrate\n",
    "function first": "from md_cg import migrate\nfrom md_cg.migrate import verify_migration\n",
    "attribute, then import as": "import md_cg\nmigrate = md_cg.migrate\nimport md_cg.migrate as m\n",
    "import submodule": "import md_cg.migrate\nimport md_cg\nmigrate = md_cg.migrate\n",
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_md_cg_migrate_runs_a_migration_whatever_was_imported_first(order: str, tmp_path: Path) -> None:
    """`from md_cg.migrate import verify_migration; from md_cg import migrate; migrate(...)`
    raised TypeError: 'module' object is not callable (importing the submodule bound the
    package's attribute to the module)."""
    script = ORDERS[order] + (
        "import json, sys, md_cg\n"
        "from md_cg.migrate import MigrationReport, verify_migration\n"
        "r1 = migrate(sys.argv[1], sys.argv[2], dry_run=True)\n"
        "r2 = md_cg.migrate(sys.argv[1], sys.argv[2], dry_run=True)\n"
        "print(json.dumps([type(r1) is MigrationReport, type(r2) is MigrationReport, r1.ok, r2.rows,\n"
        "    callable(md_cg.migrate), md_cg.migrate.verify_migration is verify_migration,\n"
        "    md_cg.migrate is sys.modules['md_cg.migrate']]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(bundled_sample_path()), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        env=ENV,
    )
    assert out.returncode == 0, out.stderr
    rows = md_cg.migrate(bundled_sample_path(), tmp_path / "dry", dry_run=True).rows
    assert json.loads(out.stdout) == [True, True, True, rows, True, True, True]
    assert not (tmp_path / "out").exists()  # dry runs


def test_md_cg_migrate_reads_as_the_function() -> None:
    import md_cg.migrate as module

    assert md_cg.migrate is module and callable(module)
    assert inspect.signature(md_cg.migrate) == inspect.signature(module.migrate)
    assert "migrate" in md_cg.__all__


def test_a_public_name_that_is_also_a_module_is_callable_as_it() -> None:
    """A public name shadowed by a submodule of that name must keep working as the name."""
    modules = {m.name for m in pkgutil.iter_modules(md_cg.__path__)}
    shared = sorted(set(md_cg.__all__) & modules)
    assert shared == ["migrate"]
    for name in shared:
        module = importlib.import_module(f"md_cg.{name}")
        assert callable(module), name
        assert inspect.signature(module) == inspect.signature(getattr(module, name))


# -- api.md names what md_cg exports, and only what resolves -------------------------------


def mentioned(name: str, text: str) -> bool:
    """``name`` alone or as ``md_cg.name`` (not ``md_cg.loop.name``)."""
    return re.search(r"(?:(?<![\w.])|(?<=\bmd_cg\.))" + re.escape(name) + r"(?!\w)", text) is not None


def test_every_public_name_is_in_api_md() -> None:
    """15 names of md_cg.__all__ (EDGE_TYPES, IdCollisionError, configure_clone...) were
    in no line of api.md."""
    assert [n for n in sorted(md_cg.__all__) if not mentioned(n, API)] == []


def test_every_md_cg_name_in_api_md_resolves() -> None:
    names = set(re.findall(r"md_cg(?:\.\w+)+", API))
    names |= {
        f"md_cg.{m}.{n.strip()}"
        for m, ns in re.findall(r"^from md_cg\.(\w+) import ([^\n#]+)", API, re.M)
        for n in ns.split(",")
    }
    assert "md_cg.loop.InvalidVerdictError" not in names  # it is md_cg.InvalidVerdictError
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        found = None
        for cut in range(len(parts), 0, -1):  # the longest module, then attributes
            try:
                if importlib.util.find_spec(".".join(parts[:cut])) is None:
                    continue
            except ImportError:  # a module's attribute, not a submodule
                continue
            found = importlib.import_module(".".join(parts[:cut]))
            for attr in parts[cut:]:
                found = getattr(found, attr, None)
            break
        if found is None:
            missing.append(name)
    assert missing == []
    top = {n.split(".")[1] for n in names}
    modules = {m.name for m in pkgutil.iter_modules(md_cg.__path__)}
    assert sorted(top - set(md_cg.__all__) - modules) == []


#: Types api.md names as what a call returns, or as parts of those, that live in submodules.
RETURN_TYPES = [
    "Reopened", "InjectItem", "RecallStats", "Resurfaced", "OrganizeResult", "Neighbour", "Reflection",
    "FlywheelStep", "Resolution", "BadRecord", "BucketHealth", "AppendLog", "Updated",
]  # fmt: skip


def test_the_types_calls_return_are_importable_from_md_cg() -> None:
    """api.md says everything in it is importable from md_cg; these twelve were not."""
    annotated = set()
    for ann in re.findall(r"-> ([\w\[\], .\\|]+)`", API):
        annotated |= set(re.findall(r"\b[A-Z]\w+", ann))
    assert annotated - set(md_cg.__all__) == {"None", "Path"}
    assert set(RETURN_TYPES) - annotated == {"BadRecord", "BucketHealth"}  # named as fields
    for name in RETURN_TYPES:
        assert name in md_cg.__all__
        value = getattr(md_cg, name)
        assert getattr(importlib.import_module(value.__module__), name) is value
    script = "from md_cg import " + ", ".join(RETURN_TYPES) + "; print('ok')"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, env=ENV)
    assert out.stdout == "ok\n", out.stderr


# -- api.md's facts ---------------------------------------------------------------------------


def test_api_md_departure_parameter_and_report_fields() -> None:
    params = list(inspect.signature(md_cg.MdCG.departure).parameters)
    assert params == ["self", "node_id"]
    assert "`departure(node_id) -> Departure \\| None`" in API
    text = flat(API)
    row = text[
        text.index("`ImportReport`: `") : text.index(
            "`summary()`, `to_dict()`", text.index("`ImportReport`: `")
        )
    ]
    fields = row.removeprefix("`ImportReport`: `")
    while "(" in fields:  # what the parentheses say of a field
        fields = re.sub(r" ?\([^()]*\)", "", fields)
    listed = fields.rstrip("`; ").split(", ")
    assert listed == [f.name for f in dataclasses.fields(md_cg.ImportReport)]


def test_api_md_init_folder_names_what_it_creates(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    with md_cg.MdCG(root) as store:
        store.init_folder()
    made = sorted(p.name for p in root.iterdir())
    assert made == [".gitattributes", ".gitignore", ".mdcg", *sorted(md_cg.LAYERS)]
    row = next(line for line in API.splitlines() if line.startswith("| `init_folder() -> None`"))
    assert all(f"`{name}`" in row for name in (".mdcg/", ".gitignore", ".gitattributes"))


def test_api_md_error_table_names_each_error_and_its_base() -> None:
    rows = {r.split(" | ")[0].strip("| `").split("`")[0]: r for r in API.splitlines() if r.startswith("| `")}
    errors = [
        n
        for n in md_cg.__all__
        if isinstance(getattr(md_cg, n), type) and issubclass(getattr(md_cg, n), Exception)
    ]
    in_table = {
        n
        for n in errors
        if any(mentioned(n, k) for k in rows) or any(f"`{n}`" in r.split(" | ")[0] for r in rows.values())
    }
    assert sorted(set(errors) - in_table) == []
    assert issubclass(md_cg.IdCollisionError, md_cg.DuplicateIdError)
    assert "subclass of `DuplicateIdError`" in rows["IdCollisionError"]
