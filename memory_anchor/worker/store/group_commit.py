"""Group commit: concurrent requests share one write transaction.

A hook event is acknowledged only once it is committed, and a commit costs far
more than the insert it carries. Requests that arrive while a commit is under
way wait for the next one, which takes them all at once: under load the cost
of a commit is shared, and a lone request is committed at once, as before.

    commits = GroupCommit(inbox.accept_many, services.run)
    inbox_id, duplicate = await commits.submit(arrival)   # returns after COMMIT
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        commit_batch: Callable[[list[Item]], list[Result]],
        run: Callable[..., Awaitable[Any]],
        *,
        alone_on_error: bool = False,
    ):
        """`commit_batch` writes items in one transaction and returns one result per item, in
        order; `run` runs it off the event loop (the loop keeps reading requests meanwhile).

        With `alone_on_error`, a batch that fails is committed again one item at a time, so one
        invalid request (an unknown branch, a bad timestamp) fails alone instead of taking the
        requests it shared a transaction with down too."""
        self._commit_batch = commit_batch
        self._run = run
        self._alone_on_error = alone_on_error
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._committer: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        """Commit `item` (with whatever else is waiting); returns its result once durable."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._committer is None:
            # Started as a task, it first runs after the handlers already scheduled
            # in this loop turn, so requests that arrived together go in together.
            self._committer = asyncio.create_task(self._commit_while_waiting())
        return await future

    async def _commit_while_waiting(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                await self._commit(batch)
        finally:
            self._committer = None

    async def _commit(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            results = await self._run(self._commit_batch, [item for item, _ in batch])
        except asyncio.CancelledError:  # the worker is stopping: nobody is left to answer
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # nothing in the batch was committed: every waiter hears why
            if self._alone_on_error and len(batch) > 1:
                for one in batch:
                    await self._commit([one])
                return
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(batch, results):
            if not future.done():  # a client that hung up has a cancelled future
                future.set_result(result)
