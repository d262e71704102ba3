"""``organize``'s candidates and decisions have item schemas (session 37's second MCP
review, F-E): before, each was ``{"type": "object", "additionalProperties": true}``, so an
agent learnt the keys, the layers a candidate may take and the actions only from the
description's ``[{"layer", "title", "content", ...}]`` or from a ``skipped`` entry after
the call. The library still checks every value: a value outside a schema's ``enum`` gets
its ``skipped`` entry naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import jsonschema  # the mcp SDK's own dependency
from mcp import Client

from md_cg import LAYERS, MdCG, mcp_server
from md_cg.mcp_server import create_server


async def _organize(root: Path, calls: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    server = create_server(root)
    try:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return tools["organize"].input_schema, [await client.call_tool("organize", a) for a in calls]
    finally:
        server.store.close()


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_the_item_schemas_name_keys_layers_and_actions(tmp_path: Path) -> None:
    schema, _ = anyio.run(_organize, tmp_path / "m", [])
    assert schema["properties"]["candidates"] == {
        "type": "array",
        "description": "dryRun: at most 50 memories to compare; optional: "
        "importance 0-1, temporal, sensitivity, agent_scope, workspace_scope.",
        "items": {
            "type": "object",
            "properties": {
                "layer": {"type": "string", "enum": [*LAYERS[:5]]},
                "title": {"type": "string"},
                "content": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["layer", "title", "content"],
        },
    }
    assert schema["properties"]["decisions"]["items"] == {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["save", "discard", "archive"]},
            "index": {"type": "integer", "minimum": 0},
            "id": {"type": "string"},
        },
        "required": ["action"],
    }
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_copied_sets_are_the_librarys() -> None:
    assert LAYERS[:5] == ("anchor", "structural", "knowledge", "contextual", "self")
    from md_cg import dedupe, organize

    assert mcp_server.CANDIDATE_LAYERS == dedupe.CANDIDATE_LAYERS
    assert mcp_server.ORGANIZE_ACTIONS == organize.ACTIONS
    assert mcp_server.MAX_CANDIDATES == organize.MAX_CANDIDATES


def test_every_layer_the_schema_offers_is_saved_and_one_outside_it_is_skipped(tmp_path: Path) -> None:
    layers = list(mcp_server.CANDIDATE_LAYERS)
    candidates: list[dict[str, Any]] = [
        {"layer": layer, "title": f"Note {i}", "content": f"Distinct fact number {i} about {layer} cranes."}
        for i, layer in enumerate(layers)
    ]
    candidates.append({"layer": "rejected", "title": "Negative", "content": "Never written by organise."})
    schema, _ = anyio.run(_organize, tmp_path / "m", [])
    validator = jsonschema.Draft202012Validator(schema)
    assert [e.json_path for e in validator.iter_errors({"mode": "dryRun", "candidates": candidates})] == [
        f"$.candidates[{len(layers)}].layer"
    ]
    _, (dry,) = anyio.run(_organize, tmp_path / "m", [{"mode": "dryRun", "candidates": candidates}])
    report = _data(dry)
    assert [s["index"] for s in report["skipped"]] == [len(layers)]
    assert report["skipped"][0]["field"] == "layer"
    decisions = [{"action": "save", "index": i} for i in range(len(layers))]
    apply = {"mode": "apply", "run_id": report["run_id"], "decisions": decisions}
    assert not list(validator.iter_errors(apply))
    _, (applied,) = anyio.run(_organize, tmp_path / "m", [apply])
    reply = _data(applied)
    assert (reply["counts"]["saved"], reply["skipped"]) == (len(layers), [])
    store = MdCG(tmp_path / "m", read_only=True)
    try:
        assert [store.get(i).layer for i in reply["saved_ids"]] == layers
    finally:
        store.close()
