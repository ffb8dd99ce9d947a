"""What a live batch pays however few frames it holds, on this machine:
the hand-overs between a server's event loop and a thread, a timer's wake,
a COPY statement on PostgreSQL and a PUBLISH on Redis.  Run from the
repository root:

    .venv/bin/python bench/batch_costs.py
    .venv/bin/python bench/batch_costs.py \\
        --database-url postgres://postgres@127.0.0.1:5432/postgres --redis-url redis://127.0.0.1:6379/5

Each figure is the process's CPU time (user + system) and the wall time a
step, averaged over many steps:

* a round trip from an asyncio loop to a one-thread `ThreadPoolExecutor` and
  back (`run_in_executor` of a function that does nothing), back to back,
  and with a 4 ms sleep between two (a live batch's window: the thread has
  gone to sleep meanwhile);
* the 4 ms sleep alone (a timer's wake of an idle loop);
* with `--database-url` (PostgreSQL): a COPY of 1, 5, 20 and 100 rows of a
  frame's size into a temporary table, in autocommit with
  `synchronous_commit = off`, as a recording writes its batches;
* with `--redis-url`: a PUBLISH to a channel nobody listens to, awaited,
  through redis-py's asyncio client, alone and in pipelines of 5 and 10
  (a figure a PUBLISH), as the channel layer sends.

A live recording pays a round trip to its batch thread, a timer, a COPY
and a PUBLISH for each batch: with many captures streaming at once, most
batches hold a frame or two (bench/README.md, seventeenth stop).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable

import psycopg
import redis.asyncio as aioredis

FRAME_ROW = (1, 2, "x" * 220, '[{"a": 1}]')  # about a live frame's row


def nothing() -> None:
    return None


async def timed(step: Callable[[], Awaitable[None]], count: int) -> tuple[float, float]:
    """(CPU us, wall us) of one `step`, the mean of `count`."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        await step()
    return (
        (time.process_time() - cpu) / count * 1e6,
        (time.perf_counter() - wall) / count * 1e6,
    )


def show(label: str, figures: tuple[float, float], less_wall: float = 0.0) -> None:
    cpu, wall = figures
    print(f"  {label:<52} {cpu:8.1f} us CPU {wall - less_wall:9.1f} us wall")


async def hand_overs(count: int) -> None:
    loop = asyncio.get_running_loop()
    thread = concurrent.futures.ThreadPoolExecutor(1)
    await loop.run_in_executor(thread, nothing)

    async def round_trip() -> None:
        await loop.run_in_executor(thread, nothing)

    async def sleep() -> None:
        await asyncio.sleep(0.004)

    async def round_trip_after_sleep() -> None:
        await asyncio.sleep(0.004)
        await loop.run_in_executor(thread, nothing)

    print("the event loop and a thread")
    show("to the thread and back, back to back", await timed(round_trip, count))
    slept = await timed(sleep, count // 10)
    show("a 4 ms sleep (wall: beyond the 4 ms)", slept, 4000)
    after = await timed(round_trip_after_sleep, count // 10)
    show(
        "to the thread and back after a 4 ms sleep (less it)",
        (after[0] - slept[0], after[1]),
        slept[1],
    )
    thread.shutdown()


def copies(url: str, count: int) -> None:
    print("PostgreSQL: a COPY in autocommit, synchronous_commit off")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET synchronous_commit = off")
        connection.execute("CREATE TEMPORARY TABLE batch_costs (a int, b int, c text, d text)")
        cursor = connection.cursor()
        for rows in (1, 5, 20, 100):

            def copy(rows: int = rows) -> None:
                with cursor.copy("COPY batch_costs (a, b, c, d) FROM STDIN") as writing:
                    for _ in range(rows):
                        writing.write_row(FRAME_ROW)

            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(count):
                copy()
            cpu = (time.process_time() - cpu) / count * 1e6
            wall = (time.perf_counter() - wall) / count * 1e6
            show(f"{rows} row(s) a COPY ({cpu / rows:.1f} us CPU a row)", (cpu, wall))


async def publishes(url: str, count: int) -> None:
    print("Redis: a PUBLISH, awaited (redis-py asyncio)")
    client = aioredis.from_url(url)
    message = b"x" * 2000  # about a batch's message of a few frames

    async def publish() -> None:
        await client.publish("batch-costs-nobody", message)

    await publish()
    show("a PUBLISH of 2,000 bytes", await timed(publish, count))
    for commands in (5, 10):

        async def pipelined(commands: int = commands) -> None:
            async with client.pipeline(transaction=False) as pipeline:
                for _ in range(commands):
                    pipeline.publish("batch-costs-nobody", message)
                await pipeline.execute()

        cpu, wall = await timed(pipelined, count // commands)
        show(f"a PUBLISH in a pipeline of {commands}", (cpu / commands, wall / commands))
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=5000, help="steps to average (5,000)")
    parser.add_argument("--database-url", default="", help="a PostgreSQL database to COPY into")
    parser.add_argument("--redis-url", default="", help="a Redis to PUBLISH to")
    args = parser.parse_args()
    asyncio.run(hand_overs(args.count))
    if args.database_url:
        copies(args.database_url, args.count // 5)
    if args.redis_url:
        asyncio.run(publishes(args.redis_url, args.count))


if __name__ == "__main__":
    main()
