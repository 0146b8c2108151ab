"""The shared coarse timeouts: asyncio.timeout's behaviour, one sweep for every request."""

from __future__ import annotations

import asyncio

import pytest

from proxy.path.deadlines import Deadlines


async def test_an_overdue_block_raises_timeout_at_its_deadline_not_before() -> None:
    dl = Deadlines(tick=0.02)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(TimeoutError), dl.at(t0 + 0.1) as d:
        await asyncio.sleep(5)
    assert d.expired()
    # Not before its deadline, and long before the sleep's end. How late within that is the
    # loop's scheduling, which a loaded machine stretches: no bound on it here.
    assert 0.1 <= loop.time() - t0 < 5
    assert len(dl) == 0


async def test_a_block_that_finishes_in_time_is_left_alone() -> None:
    dl = Deadlines(tick=0.01)
    loop = asyncio.get_running_loop()
    with dl.at(loop.time() + 1.0) as d:  # fifty times the work: a stalled loop cannot reach it
        await asyncio.sleep(0.02)
    assert not d.expired()
    assert len(dl) == 0
    await asyncio.sleep(1.05)  # nothing fires later either: the task was not cancelled
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_reschedule_moves_and_none_disarms() -> None:
    dl = Deadlines(tick=0.01)
    loop = asyncio.get_running_loop()
    with dl.at(loop.time() + 0.05) as d:
        d.reschedule(None)
        await asyncio.sleep(0.1)  # past the first deadline: disarmed, nothing happens
        d.reschedule(loop.time() + 2.0)  # moved far past the work: it must not fire
        await asyncio.sleep(0.05)
    assert not d.expired()
    with pytest.raises(TimeoutError), dl.at(None) as d:
        d.reschedule(loop.time() + 0.03)  # armed from inside the block
        await asyncio.sleep(1)


async def test_someone_else_s_cancel_stays_a_cancel() -> None:
    dl = Deadlines(tick=0.01)
    loop = asyncio.get_running_loop()

    async def guarded() -> None:
        with dl.at(loop.time() + 10):
            await asyncio.sleep(10)

    task = asyncio.ensure_future(guarded())
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(dl) == 0


async def test_other_errors_pass_through_and_the_sweeper_stops_when_idle() -> None:
    dl = Deadlines(tick=0.01)
    loop = asyncio.get_running_loop()
    with pytest.raises(KeyError), dl.at(loop.time() + 10):
        raise KeyError("x")
    await asyncio.sleep(0.05)
    assert dl._sweeper is None  # nothing armed: no task wakes up


async def test_many_blocks_share_one_sweep_and_each_fires_on_its_own() -> None:
    dl = Deadlines(tick=0.01)
    loop = asyncio.get_running_loop()

    async def wait(limit: float, work: float) -> str:
        try:
            with dl.at(loop.time() + limit):
                await asyncio.sleep(work)
        except TimeoutError:
            return "timeout"
        return "done"

    # Each limit a hundred times away from its work: a loaded machine that stalls the loop
    # (CI's, for a fraction of a second) cannot make a block that must time out finish first,
    # nor one that must finish time out. Half are cut short at 0.05 s in a 5 s wait, while the
    # other half, in the same sweep, finish their 0.01 s well within their 5 s.
    got = await asyncio.gather(*(wait(0.05, 5.0) if i % 2 else wait(5.0, 0.01) for i in range(40)))
    assert got == ["timeout" if i % 2 else "done" for i in range(40)]


def test_the_remembered_loop_follows_a_new_running_loop() -> None:
    dl = Deadlines(tick=0.01)

    async def use() -> asyncio.AbstractEventLoop:
        loop = dl.loop()
        assert loop is asyncio.get_running_loop()
        with pytest.raises(TimeoutError), dl.at(loop.time() + 0.02):
            await asyncio.sleep(1)
        return loop

    first = asyncio.run(use())
    second = asyncio.run(use())  # a new loop (as after a restart in tests): not the closed one
    assert first is not second


def test_a_loop_closed_mid_sweep_does_not_stop_the_next_loop_s_deadlines() -> None:
    dl = Deadlines(tick=0.01)

    async def leave_armed() -> None:
        loop = dl.loop()
        dl.at(loop.time() + 100).__enter__()  # armed, never left: its loop ends under it

    async def use() -> None:
        loop = dl.loop()
        with pytest.raises(TimeoutError), dl.at(loop.time() + 0.03):
            await asyncio.sleep(1)

    asyncio.run(leave_armed())
    asyncio.run(use())  # a sweep of its own, not the dead loop's
