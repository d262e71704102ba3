"""Session 43 (usersim H1): a bare string where a collection of ids is expected is one id
(as ``archive``/``unarchive``/``apply_changes`` take it), never its characters; bytes and
a bare string or one Node where a batch of nodes is expected are refused, naming the parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.errors import InvalidArgumentError


def _store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "mem")
    for i, b in [("k", "kitchen timer is 12 minutes"), ("p", "password hint"), ("kp", "the one meant")]:
        s.add(id=i, body=b)
    return s


def test_forget_many_takes_a_bare_string_as_one_id(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        gone = s.forget_many("kp", "the user asked to forget kp")
        assert [d.node.id for d in gone] == ["kp"]
        assert sorted(e.id for e in s.list_nodes()) == ["k", "p"]


def test_forget_many_refuses_bytes_naming_the_parameter(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        with pytest.raises(InvalidArgumentError) as err:
            s.forget_many(b"kp", "x")  # type: ignore[arg-type]
        assert err.value.name == "node_ids"
        assert str(err.value) == "node_ids must be a node id or ids, got b'kp'"
        assert sorted(e.id for e in s.list_nodes()) == ["k", "kp", "p"]


def test_access_counts_and_record_access_take_a_bare_string_as_one_id(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        s.record_access("kp")  # before: each character, NodeNotFoundError for "p"
        assert s.access_counts("kp") == {"kp": 1}
        assert s.access_counts(["k", "p"]) == {"k": 0, "p": 0}


def test_add_many_refuses_a_string_bytes_or_one_node(tmp_path: Path) -> None:
    with MdCG(tmp_path / "mem") as s:
        for arg, kind in (("ab", "str"), (b"ab", "bytes"), (Node(id="z", body="zz"), "Node")):
            with pytest.raises(InvalidArgumentError) as err:
                s.add_many(arg)  # type: ignore[arg-type]
            assert err.value.name == "nodes"
            tail = " (one node: use add)" if kind == "Node" else ""
            assert str(err.value) == f"nodes must be a list of Node objects, got {kind}{tail}"
        with pytest.raises(InvalidArgumentError) as err:
            s.apply_changes(add="ab")  # type: ignore[arg-type]
        assert err.value.name == "add"
        assert s.list_nodes() == []
