"""Where a node lives: layer folders, condition buckets and the routing key.

::

    <root>/<layer>/<id>.md                       every layer but knowledge
    <root>/knowledge/cond_<readable>_<sha8>/<id>.md
    <root>/knowledge/orphan/<id>.md              knowledge without a bucket key

The bucket key (:func:`route_key`) of a knowledge node is

1. the value of its first ``domain:<x>`` tag, if any (:func:`is_domain_tag`: the
   prefix in any case, and in full-width forms: ``domain：<x>``, ``ｄｏｍａｉｎ:<x>``);
2. else its ``condition_space.observation_position`` normalised to a domain
   (:func:`normalize_position`): instance-name tails in ASCII or full-width
   brackets and skeleton suffixes are stripped, so
   ``计算机科学·知识点（二分查找）`` and ``计算机科学·内容（按骨架填充）`` both
   give ``计算机科学``;
3. else ``None`` -- the node goes to ``orphan/``.

Writing and searching compute the key with the same function, so a caller's
context routes to the bucket its nodes were written to.

Imports only :mod:`md_cg.node`, :mod:`md_cg.paths`, :mod:`md_cg.script` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from .errors import InvalidArgumentError
from .node import Node, check_id, check_layer
from .paths import BUCKETED_LAYER, ORPHAN, node_rel
from .script import fold, short_repr

BUCKET_PREFIX = "cond_"
DOMAIN_TAG = "domain:"

#: Words that end an observation position without naming its domain: the
#: "skeleton" part of ``计算机科学·知识点（二分查找）``. Compared after NFKC
#: and case folding.
SKELETON_SUFFIXES: tuple[str, ...] = (
    "知识点",
    "内容",
    "条目",
    "实例",
    "示例",
    "案例",
    "骨架",
    "模板",
    "节点",
    "要点",
    "概念",
    "item",
    "instance",
    "entry",
    "example",
    "content",
    "template",
    "topic",
)

_SEPARATORS = " \t·・•/|>:：-—_,，;；"
_UNSAFE_DIR_CHARS = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f\s.]+')
_READABLE_MAX = 40


def normalize_domain(value: str) -> str:
    """NFKC + case fold + trimmed separators: the identity of a domain string."""
    return fold(value, collapse=False).strip(_SEPARATORS)


def normalize_position(position: str) -> str | None:
    """Reduce an ``observation_position`` to its domain, or ``None`` if nothing is left.

    Repeatedly strips a trailing bracket group (ASCII or full-width, which NFKC
    folds to ASCII), then a trailing skeleton suffix (:data:`SKELETON_SUFFIXES`),
    then trailing separators, until nothing changes.
    """
    text = fold(position, collapse=False).strip()
    while True:
        before = text
        # The bracket group must close the text (blanks aside); the checks
        # before the regex and the suffix loop only skip what cannot match.
        if text.rstrip().endswith(")"):
            text = _without_tail_group(text)
        text = text.rstrip(_SEPARATORS)
        if text.endswith(SKELETON_SUFFIXES):
            for suffix in SKELETON_SUFFIXES:
                if text.endswith(suffix) and len(text) > len(suffix):
                    text = text[: -len(suffix)].rstrip(_SEPARATORS)
                    break
        if text == before:
            break
    text = text.strip(_SEPARATORS)
    if not text or text in SKELETON_SUFFIXES:
        return None
    return text


def _without_tail_group(text: str) -> str:
    """``text`` without the bracket group that closes it (blanks around it dropped), nested
    groups inside it included: ``topic (Ohm (unit))`` -> ``topic`` (session 38's migration
    simulation: the one-level pattern before left such a Wikipedia-style name whole, and
    each of its memories got a bucket of its own). An unbalanced tail is left as it is."""
    body = text.rstrip()
    depth = 0
    for i in range(len(body) - 1, -1, -1):
        if body[i] == ")":
            depth += 1
        elif body[i] == "(":
            depth -= 1
            if depth == 0:
                return body[:i].rstrip()
    return text


def domain_from_tags(tags: Iterable[str]) -> str | None:
    """The normalised value of the first non-empty ``domain:`` tag."""
    for tag in tags:
        if isinstance(tag, str) and (tag[:1] in _DOMAIN_D and is_domain_tag(tag)):
            value = normalize_domain(tag[len(DOMAIN_TAG) :])
            if value:
                return value
    return None


#: How a domain tag starts: ``d`` or ``D``, ASCII or full-width (a set lookup passes
#: the other tags over at once: the route key is computed on every write).
_DOMAIN_D = frozenset("dD\uff44\uff24")


def is_domain_tag(tag: str) -> bool:
    """Whether ``tag`` starts with :data:`DOMAIN_TAG`, letter case aside and after NFKC:
    ``Domain:x``, and ``domain：x`` with the full-width colon a Chinese or Japanese input
    method types (or ``ｄｏｍａｉｎ:x``), which went to ``orphan/`` before session 41."""
    head = tag[: len(DOMAIN_TAG)]
    if head.isascii():
        return head.lower() == DOMAIN_TAG
    # only compatibility forms (U+FE00 up: full-width, small) fold to ASCII
    return max(head) >= "\ufe00" and fold(head, collapse=False) == DOMAIN_TAG


def route_key_of(tags: Iterable[str] = (), condition_space: Mapping[str, Any] | None = None) -> str | None:
    """The bucket key from tags and a condition space (see module docstring)."""
    key = domain_from_tags(tags or ())
    if key:
        return key
    if isinstance(condition_space, Mapping):
        position = condition_space.get("observation_position")
        if isinstance(position, str) and position.strip():
            return normalize_position(position)
    return None


def route_key(node: Node) -> str | None:
    """The bucket key of a node (``None``: no key, the node is an orphan)."""
    return route_key_of(node.tags, node.condition_space)


@lru_cache(maxsize=4096)
def bucket_dir(key: str | None) -> str:
    """Folder name of the bucket for ``key``: ``cond_<readable>_<sha8>`` or ``orphan``."""
    if not key:
        return ORPHAN
    readable = _UNSAFE_DIR_CHARS.sub("_", key).strip("_")[:_READABLE_MAX].rstrip("_")
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
    return f"{BUCKET_PREFIX}{readable or 'x'}_{digest}"


def bucket_of(node: Node) -> str | None:
    """Bucket folder of a node, ``None`` for layers that are not bucketed."""
    if node.layer != BUCKETED_LAYER:
        return None
    return bucket_dir(route_key(node))


def rel_dir(layer: str, bucket: str | None) -> str:
    """Relative folder (POSIX form) for a layer and bucket."""
    check_layer(layer)
    if layer == BUCKETED_LAYER:
        return f"{layer}/{bucket or ORPHAN}"
    return layer


def rel_path(node: Node) -> str:
    """Relative path (POSIX form) where ``node`` is stored."""
    check_id(node.id)
    check_layer(node.layer)
    return node_rel(node.layer, bucket_of(node), node.id)


def context_route_key(context: Any) -> str | None:
    """The bucket key a caller's search ``context`` routes to.

    Accepted forms: a domain string; a mapping with ``domain``, ``tags`` (a list of
    tags, or one tag as a string) and/or
    ``condition_space`` (or condition-space fields at the top level, such as
    ``observation_position``); a :class:`Node`. ``None`` means no routing.
    """
    if context is None:
        return None
    if isinstance(context, Node):
        return route_key(context)
    if isinstance(context, str):
        return normalize_domain(context) or None
    if isinstance(context, Mapping):
        check_context_fields(context)
        domain = context.get("domain")
        if isinstance(domain, str) and normalize_domain(domain):
            return normalize_domain(domain)
        space = context.get("condition_space")
        if not isinstance(space, Mapping) and "observation_position" in context:
            space = context
        tags = context.get("tags") or ()
        # one string is one tag (its characters were read as the tags: routed nowhere)
        return route_key_of((tags,) if isinstance(tags, str) else tags, space)
    raise InvalidArgumentError(
        f"search context must be None, a domain string, a mapping or a Node, got {type(context).__name__}",
        name="context",
        value=context,
    )


#: The keys of a search context md-cg reads; a key a letter or two from one (``tag``,
#: ``domains``, ``conditions_space``) is refused as a misspelling of it (session 43).
CONTEXT_KEYS = ("tags", "domain", "condition_space", "big_domain", "observation_position")


def check_context_fields(context: Mapping[str, Any]) -> None:
    """Refuse a context mapping whose routing fields have the wrong type, naming the field.

    ``{"tags": 5}`` raised a bare TypeError from :func:`domain_from_tags`, and
    ``{"domain": 5}`` routed nowhere without a word. ``tags`` must be a list of
    strings, or one string (one tag, as a node file's ``tags: python`` is: see
    :func:`context_route_key`); ``domain`` and ``observation_position`` a string;
    ``condition_space`` an object. ``None`` is "not given". The other keys are free
    text for the judge.
    """
    for key in context:
        close = (
            difflib.get_close_matches(key.casefold(), CONTEXT_KEYS, n=1, cutoff=0.8)
            if isinstance(key, str)
            else []
        )
        if close and key not in CONTEXT_KEYS:  # {"tag": [...]} routed nowhere without a word
            raise InvalidArgumentError(
                f"context key {key!r} is not one md-cg reads: did you mean {close[0]!r}? (it reads "
                f"{', '.join(CONTEXT_KEYS)}; other keys are text for the judge)",
                name=f"context.{key}",
                value=context,
            )
    tags = context.get("tags")
    if tags is not None and not isinstance(tags, str):
        # a list's bad element, found as a list: a null element ([null]) is one too
        listed = isinstance(tags, (list, tuple, set, frozenset))
        bad = [t for t in tags if not isinstance(t, str)][:1] if listed else [tags]
        if bad:
            got = "null" if bad[0] is None else f"{type(bad[0]).__name__} {short_repr(bad[0])}"
            raise InvalidArgumentError(
                f'context.tags must be a list of tags (strings such as "domain:计算机科学") or one '
                f"tag, got {got}",
                name="context.tags",
                value=tags,
            )
    space = context.get("condition_space")
    if space is not None and not isinstance(space, Mapping):
        raise InvalidArgumentError(
            f"context.condition_space must be an object, got {type(space).__name__} {short_repr(space)}",
            name="context.condition_space",
            value=space,
        )
    strings = [
        ("domain", context.get("domain")),
        ("observation_position", context.get("observation_position")),
    ]
    if space is not None:
        strings.append(("condition_space.observation_position", space.get("observation_position")))
    for name, value in strings:
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(
                f"context.{name} must be a string, got {type(value).__name__} {short_repr(value)}",
                name=f"context.{name}",
                value=value,
            )
