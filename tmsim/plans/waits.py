"""A graph of waits: nodes that each take their duration once every node before them has
ended, some of them on a *server* that runs one node at a time (a copy path taking one copy
at a time), in the order they become ready.

:func:`~tmsim.plans.streams.timeline` builds one per plan; :meth:`Waits.solve` gives every
node's end in one pass over the nodes in the order they become ready, which is the order a
discrete-event run would start them in: a node ready at ``r`` starts at ``r``, or, on a
server, when the server has ended every node that became ready before it (ties: the node
made first).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


class Waits:
    """Nodes with durations, waits between them and servers (see the module documentation)."""

    def __init__(self) -> None:
        self.dur: list[float] = []
        self.before: list[list[int]] = []
        self.server: list[int] = []
        self.end: list[float | None] = []

    def node(self, dur: float, after: Iterable[int] = (), server: int = -1) -> int:
        """A new node of ``dur`` seconds after the nodes ``after`` (negative ones ignored),
        on ``server`` (-1: none); returns its index."""
        self.dur.append(dur)
        self.before.append([])
        self.server.append(server)
        self.end.append(None)
        n = len(self.dur) - 1
        self.add(n, after)
        return n

    def add(self, n: int, after: Iterable[int]) -> None:
        """Node ``n`` also waits for the nodes ``after`` (negative ones ignored)."""
        self.before[n] += [a for a in after if a >= 0]

    def solve(self) -> list[float] | None:
        """Every node's end, or None if some wait in a circle (their ends stay None)."""
        users: list[list[int]] = [[] for _ in self.dur]
        left = [len(b) for b in self.before]
        for n, before in enumerate(self.before):
            for b in before:
                users[b].append(n)
        ready_at = [0.0] * len(self.dur)
        heap = [(0.0, n) for n, c in enumerate(left) if c == 0]
        heapq.heapify(heap)
        free: dict[int, float] = {}  # server -> when it ends its last node
        while heap:
            ready, n = heapq.heappop(heap)
            start = max(ready, free.get(self.server[n], 0.0)) if self.server[n] >= 0 else ready
            end = start + self.dur[n]
            if self.server[n] >= 0:
                free[self.server[n]] = end
            self.end[n] = end
            for u in users[n]:
                ready_at[u] = max(ready_at[u], end)
                left[u] -= 1
                if left[u] == 0:
                    heapq.heappush(heap, (ready_at[u], u))
        if any(e is None for e in self.end):
            return None
        return [float(e) for e in self.end if e is not None]


__all__ = ["Waits"]
