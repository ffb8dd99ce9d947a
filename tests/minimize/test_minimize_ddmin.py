"""ddmin: finds a 1-minimal failing sub-list, deterministically, testing each
configuration once, within its deadline."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.minimize.ddmin import DDProgress, DDStats, ddmin


def inducing(*groups: frozenset[int]):
    """A test that fails when the configuration holds all of some group."""

    def fails(config: list[int]) -> bool:
        held = set(config)
        return any(group <= held for group in groups)

    return fails


def assert_one_minimal(result: list, fails) -> None:
    assert fails(result)
    for i in range(len(result)):
        assert not fails(result[:i] + result[i + 1 :]), f"item {result[i]!r} can go"


sizes = st.integers(min_value=1, max_value=40)


@st.composite
def problems(draw):
    """Items 0..n-1 and 1-3 failure-inducing groups of them."""
    n = draw(sizes)
    group = st.frozensets(st.integers(0, n - 1), min_size=1, max_size=min(n, 5))
    groups = draw(st.lists(group, min_size=1, max_size=3))
    return list(range(n)), groups


@settings(max_examples=200, deadline=None)
@given(problems())
def test_result_fails_and_is_one_minimal(problem):
    items, groups = problem
    fails = inducing(*groups)
    result = ddmin(items, fails)
    assert_one_minimal(result, fails)
    assert result == sorted(result)  # items keep their order
    assert set(result) <= set(items)


@settings(max_examples=100, deadline=None)
@given(problems())
def test_deterministic_and_every_configuration_tested_once(problem):
    items, groups = problem
    runs = []
    for _ in range(2):
        seen: list[tuple[int, ...]] = []

        def fails(config, seen=seen):
            seen.append(tuple(config))
            return inducing(*groups)(config)

        runs.append((ddmin(items, fails), seen))
    (first, first_seen), (second, second_seen) = runs
    assert first == second
    assert first_seen == second_seen  # the same tests, in the same order
    assert len(first_seen) == len(set(first_seen))  # the cache answers repeats


@settings(max_examples=100, deadline=None)
@given(problems(), st.integers(min_value=0, max_value=30))
def test_respects_the_deadline(problem, budget):
    """A clock that advances one tick per test: no test starts at or after
    the deadline, and what comes back still fails."""
    items, groups = problem
    fails = inducing(*groups)
    ticks = itertools.count()
    now = [0]

    def clock() -> float:
        return now[0]

    def timed(config):
        now[0] = next(ticks) + 1
        return fails(config)

    stats = DDStats()
    result = ddmin(items, timed, deadline=budget, stats=stats, clock=clock)
    assert stats.tests_run <= budget
    assert fails(result)
    if stats.timed_out:
        assert stats.tests_run == budget
    else:
        assert_one_minimal(result, fails)


def test_a_deadline_already_past_returns_the_input_untested():
    stats = DDStats()
    calls = []
    result = ddmin(list(range(10)), lambda c: calls.append(c) or True, deadline=0.0, stats=stats)
    assert result == list(range(10))
    assert stats.timed_out and stats.tests_run == 0 and calls == []


def test_the_single_needed_item_is_found_in_few_tests():
    stats = DDStats()
    result = ddmin(list(range(1024)), lambda c: 700 in c, stats=stats)
    assert result == [700]
    assert stats.tests_run <= 2 * 10 + 2  # two halves per level, then the empty list


def test_a_pair_far_apart():
    fails = inducing(frozenset({3, 97}))
    assert ddmin(list(range(100)), fails) == [3, 97]


def test_empty_and_single_inputs():
    assert ddmin([], lambda c: True) == []
    assert ddmin(["x"], lambda c: True) == []  # even the empty list fails
    assert ddmin(["x"], lambda c: bool(c)) == ["x"]


def test_unhashable_items_and_progress():
    items = [{"n": i} for i in range(8)]
    reports: list[DDProgress] = []
    result = ddmin(items, lambda c: {"n": 5} in c, progress=reports.append)
    assert result == [{"n": 5}]
    assert reports and [r.tests_run for r in reports] == list(range(1, len(reports) + 1))
    assert reports[-1].size == 1
