"""The documentation's Python examples run as written."""

from __future__ import annotations

import re
import time
import tomllib
from pathlib import Path

import pytest
from conftest import REPO


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("doc", ["docs/tutorial.md", "README.md"])
def test_python_examples_run(doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in python_blocks(REPO / doc):
        exec(compile(block, doc, "exec"), namespace)
    store = namespace.get("store")
    if store is not None and hasattr(store, "close"):
        store.close()


def test_tutorial_claims_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The printed values the tutorial states in comments."""
    monkeypatch.chdir(tmp_path)
    ns: dict[str, object] = {}
    blocks = python_blocks(REPO / "docs/tutorial.md")
    exec(compile(blocks[0] + blocks[1], "tutorial", "exec"), ns)
    store = ns["store"]
    results, _ = store.search("binary search over a linked list")  # type: ignore[attr-defined]
    assert results[0].state == "REJECT"
    assert results[0].basis == 'REJECT: not-applicable condition "linked list" matched by the query'
    results, meta = store.search("binary search", k=1, context={"tags": ["domain:computing"]})  # type: ignore[attr-defined]
    assert results[0].tier == "T0"
    assert meta["scanned_share"] == 1.0
    week = time.time() - 7 * 86400
    results, meta = store.search("binary search", tag="algorithm", since=week)  # type: ignore[attr-defined]
    assert [r.id for r in results] == ["kp_bsearch"]
    assert meta["filter"] == {"tag": "algorithm", "since": week, "until": None, "matching": 1}
    assert store.verify("kp_bsearch", "x", "confirmed").confidence == 0.65  # type: ignore[attr-defined]
    store.close()  # type: ignore[attr-defined]


def test_readme_quick_start_is_two_commands_that_install_what_they_show() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start") : text.index("## The 60-second tour")]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    assert blocks[0].splitlines() == [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[all,dev]' && .venv/bin/mdcg demo",
        ".venv/bin/python -m pytest",
    ]


def test_the_core_install_leaves_mcp_to_an_extra_and_installs_only_md_cg() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    core = {re.split(r"[<>=\[ ]", d)[0].lower() for d in meta["project"]["dependencies"]}
    assert core == {"python-frontmatter", "pyyaml", "portalocker", "orjson", "rapidfuzz", "numpy",
                    "pystemmer", "typer", "rich"}  # fmt: skip
    extras = meta["project"]["optional-dependencies"]
    assert extras["mcp"] == ["mcp>=2,<3"]
    assert extras["all"] == ["md-cg[mcp,anthropic,langgraph]"]
    assert {"pytest", "hypothesis", "ruff"} <= {re.split(r"[<>=]", d)[0] for d in extras["dev"]}
    # migrate/ and census/ are checkout wrappers, never installed as top-level packages
    assert meta["tool"]["setuptools"]["packages"] == ["md_cg", "md_cg.integrations"]
    assert meta["project"]["scripts"] == {"mdcg": "md_cg.launch:main"}
