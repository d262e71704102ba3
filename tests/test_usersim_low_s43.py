"""Session 43 usersim, low findings: ``bucket_degraded`` is advice (``ok`` stays True, the
detail says what to do); a misspelt search context key is refused; ``since``/``until`` take an
aware datetime; a read-only handle's ``sync()`` points to ``refresh()``."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app


def test_bucket_degraded_is_advice_with_an_action(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with MdCG(root) as s:
        for i in range(100):
            s.add(body=f"Plain note number {i}: the user mentioned item {i}.")
        h = s.health()
    assert [(f.kind, f.severity) for f in h.findings] == [("bucket_degraded", "warning")]
    assert h.ok is True
    assert h.findings[0].detail == (
        "largest bucket 'orphan' holds 100.00% of nodes (100/100; limit 30%); expected scan share is "
        "100.00% (sum of squared bucket sizes / nodes²; limit 30%). Advice, nothing is wrong: searches "
        "scan more memories than they would if the memories were spread over domains; tag memories by "
        "topic (mdcg update ID --tag domain:work, add --tag domain:NAME) so a search with a context "
        "scans only its domain's bucket"
    )
    out = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"}).invoke(app, ["health", "--root", str(root)])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("health: OK, 1 advisory finding(s) · 100 nodes")
    assert "bucket_degraded" in out.output


def test_search_refuses_a_misspelt_context_key(tmp_path: Path) -> None:
    import pytest

    from md_cg.errors import InvalidArgumentError

    with MdCG(tmp_path / "mem") as s:
        s.add(id="a", body="alpha work item", tags=["domain:work"])
        for key, meant in (
            ("tag", "tags"),
            ("Tags", "tags"),
            ("domains", "domain"),
            ("bigdomain", "big_domain"),
        ):
            with pytest.raises(InvalidArgumentError) as err:
                s.search("alpha", context={key: ["domain:work"]})
            assert str(err.value) == (
                f"context key {key!r} is not one md-cg reads: did you mean {meant!r}? (it reads tags, "
                "domain, condition_space, big_domain, observation_position; other keys are text for the "
                "judge)"
            )
            assert err.value.name == f"context.{key}"
        _, meta = s.search("alpha", context={"tags": ["domain:work"], "task": "free text"})
        assert meta["route_key"] == "work"


def test_since_and_until_take_an_aware_datetime(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    import pytest

    from md_cg.errors import InvalidArgumentError

    with MdCG(tmp_path / "mem") as s:
        s.add(id="a", body="alpha", created_at=1_700_000_000.0)
        before, after = datetime(2020, 1, 1, tzinfo=UTC), datetime(2999, 1, 1, tzinfo=UTC)
        assert [r.id for r in s.search("alpha", since=before)[0]] == ["a"]  # type: ignore[arg-type]
        assert s.search("alpha", since=before)[1]["filter"]["since"] == 1577836800.0  # type: ignore[arg-type]
        assert s.list_page(since=before, until=after).total == 1  # type: ignore[arg-type]
        assert s.list_page(since=after).total == 0  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError) as err:
            s.search("alpha", since=datetime(2020, 1, 1))  # type: ignore[arg-type]
        assert str(err.value) == (
            "since is a datetime without a time zone (2020-01-01T00:00:00): give it tzinfo "
            "(datetime.now(timezone.utc), or .astimezone() for local time), or epoch seconds"
        )


def test_a_read_only_sync_points_to_refresh(tmp_path: Path) -> None:
    from md_cg.errors import ReadOnlyStoreError

    root = tmp_path / "mem"
    MdCG(root).add(id="a", body="x")
    ro, message = MdCG(root, read_only=True), ""
    try:
        ro.sync()
    except ReadOnlyStoreError as exc:
        message = str(exc)
    finally:
        ro.close()
    assert message == (
        f"store {root} was opened read-only: sync() writes the index; a read-only handle picks up "
        "other processes' changes with refresh() or sync_if_changed() (they write nothing)"
    )
