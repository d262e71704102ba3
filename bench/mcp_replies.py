"""Sizes of the MCP server's replies on one store: the tool list and k=5 searches.

    python -m md_cg.sample /tmp/s30k.sqlite --knowledge 29820      # 30,000 nodes
    mdcg migrate /tmp/s30k.sqlite /tmp/s30k --quiet
    python bench/mcp_replies.py /tmp/s30k [--k 5] [--label after]

Drives ``md_cg.mcp_server.create_server`` through the MCP SDK's in-process
client, exactly as a client sees the server, and prints one Markdown row per
query: the characters of the reply's text block (what the model reads), the
characters of the whole tool result as JSON on the wire (text block plus
structured content), and the result count. It imports whichever ``md_cg`` is
first on the path, so the same script measures an older checkout
(``PYTHONPATH=/path/to/old/checkout``). Tokens are estimated as characters / 4.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from md_cg import MdCG
from md_cg.mcp_server import create_server

#: Queries in both languages: facts, procedures, a typo and nonsense.
QUERIES = (
    "二分查找",
    "牛顿第二定律",
    "能量守恒",
    "binary search",
    "asyncio",
    "what time zone does the user live in",
    "when is the Atlas deadline?",
    "Doppler effect",
    "快速排序的时间复杂度",
    "xyzzy plugh",
)


def _wire(result: Any) -> int:
    return len(
        json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False)
    )


async def _measure(root: Path, k: int) -> tuple[dict[str, int], list[dict[str, Any]]]:
    with MdCG(root) as store:
        server = create_server(root, store=store)
        async with Client(server) as client:
            tools = await client.list_tools()
            listing = json.dumps(
                tools.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False
            )
            tool_list = {"tools": len(tools.tools), "chars": len(listing)}
            rows = []
            for query in QUERIES:
                result = await client.call_tool("search", {"query": query, "k": k})
                text = result.content[0].text if result.content else ""
                data = json.loads(text) if text else {}
                rows.append(
                    {
                        "query": query,
                        "text_chars": len(text),
                        "wire_chars": _wire(result),
                        "results": len(data.get("results", [])),
                        "error": bool(result.is_error),
                    }
                )
    return tool_list, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path, help="the store folder")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    tool_list, rows = anyio.run(_measure, args.root, args.k)
    with MdCG(args.root, read_only=True) as store:
        size = len(store)
    label = f" ({args.label})" if args.label else ""
    print(
        f"store: {size:,} nodes; tool list{label}: {tool_list['tools']} tools, {tool_list['chars']:,} chars "
        f"(~{tool_list['chars'] // 4:,} tokens)\n"
    )
    print(f"| query | k | results | text chars{label} | wire chars{label} |")
    print("|---|---|---|---|---|")
    for r in rows:
        err = " (error)" if r["error"] else ""
        print(
            f"| `{r['query']}` | {args.k} | {r['results']}{err} | {r['text_chars']:,} | {r['wire_chars']:,} |"
        )
    texts = [r["text_chars"] for r in rows]
    print(f"\nmax text chars {max(texts):,}; median {statistics.median(texts):,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
