"""``Client.results`` (the op ``results``, issue 32: fan-in reads the state and
result of many jobs in one round trip), against a real client-clock daemon."""

from __future__ import annotations

import pytest

import fenceq
from conftest import record_requests


def test_results_maps_each_id_asked_to_its_state_and_result(client: fenceq.Client):
    assert client.enqueue("parent-a", queue="q")
    assert client.enqueue("parent-b", queue="q")
    fence = client.claim("parent-a", "w", 10, now=1.0)
    assert client.complete("parent-a", "w", fence, "A", now=2.0) is True
    sent = record_requests(client)

    answer = client.results(["parent-b", "missing", "parent-a", "parent-b"], now=3.0)

    assert sent[0][:2] == ("results", {"ids": ["parent-b", "missing", "parent-a", "parent-b"],
                                       "now": 3.0})
    assert answer == {
        "parent-b": {"state": "ready", "result": None},
        "missing": None,
        "parent-a": {"state": "done", "result": "A"},
    }
    # Duplicates collapse: each id once, in the order first asked.
    assert list(answer) == ["parent-b", "missing", "parent-a"]


def test_results_takes_any_iterable_of_ids_and_reports_leased_and_done_without_result(
        client: fenceq.Client):
    assert client.enqueue("x")
    assert client.enqueue("y")
    client.claim("x", "w", 10, now=1.0)
    fence = client.claim("y", "w", 10, now=1.0)
    assert client.complete("y", "w", fence, None, now=2.0) is True
    answer = client.results(i for i in ("x", "y"))
    assert answer == {"x": {"state": "leased", "result": None},
                      "y": {"state": "done", "result": None}}


def test_results_bad_ids_are_the_daemons_coded_errors(client: fenceq.Client):
    with pytest.raises(fenceq.InvalidArgument) as e:
        client.results([])
    assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError)
    with pytest.raises(fenceq.InvalidArgument):
        client.results([""])
    with pytest.raises(fenceq.InvalidArgument):
        client.results([f"j{i}" for i in range(1001)])
    with pytest.raises(fenceq.BadRequest):
        client.results(["a", 5])  # type: ignore[list-item]
    with pytest.raises(fenceq.BadRequest):
        client.results("parent-a")  # a str is not a list of ids: sent as it is, refused
    assert len(client.results([f"j{i}" for i in range(1000)])) == 1000


def test_results_bad_reply_shape_is_bad_reply():
    from fenceq.client import _check_results

    ok = {"a": {"state": "done", "result": "r"}, "b": None}
    assert _check_results(ok, ["a", "b", "a"]) is ok
    for bad in ([], {"a": {"state": "done"}, "b": None}, {"a": 1, "b": None},
                {"a": {"state": "done", "result": 1}, "b": None}, {"a": None}):
        with pytest.raises(fenceq.BadReply):
            _check_results(bad, ["a", "b"])
