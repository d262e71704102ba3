"""Integrations of md-cg with the frameworks agent builders already use.

Each integration is an optional extra and is imported explicitly, so that
``import md_cg`` (and this package) never pulls in a framework:

* :mod:`md_cg.integrations.anthropic_memory` -- a backend for Claude's
  client-side memory tool (``memory_20250818``), extra ``md-cg[anthropic]``;
* :mod:`md_cg.integrations.langgraph_store` -- a LangGraph ``BaseStore``,
  extra ``md-cg[langgraph]``;
* :mod:`md_cg.integrations.aliases` -- MCP tool names of the MCP reference
  memory server and of mem0, mapped onto md-cg's MCP tools.

``docs/integrations.md`` shows how to wire each one.
"""
