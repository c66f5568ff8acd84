"""The heartbeat's cadence: when a worker renews, and how many renewals can land inside one lease.

Heartbeats keep a fixed cadence from the claim. The moment a worker hears
its claim accepted its heartbeat starts, before `start_attempt`, and it sends
a renewal every `heartbeat_interval_s` (I) after that, whatever became of the
last one: a lost or slow renewal never delays the next.

A lease granted or renewed at g runs out at g + TTL, and the renewals that
count are those that reach the orchestrator before then. Let d be how much
later than g + I the next renewal arrives: in the first window a round trip
(the claim's answer, then that renewal's way in), in later ones the
difference of two one-way delays, about nothing. With no loss,
floor((TTL - d) / I) renewals land inside a lease (`renewals_inside_lease`),
and one fewer may be lost in a row before it expires. When TTL - d is a
multiple of I the last one arrives exactly as the lease runs out and does not
count: jitter decides.

A pause freezes the heartbeat: the beats it swallowed are not sent in a
burst when it ends; the next one goes at once, then the cadence goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class Cadence:
    """One Attempt's heartbeat schedule: its origin (the claim's answer) and how many beats it has sent."""

    began_at: float
    interval_s: float
    beats: int = 0

    def next_at(self) -> float:
        """When the next renewal is due on the cadence."""
        return self.began_at + (self.beats + 1) * self.interval_s

    def beat(self, now: float) -> None:
        """A renewal goes now. Sent late (a pause swallowed beats), it stands for every beat due by now: none is sent late."""
        due = self.beats + 1
        if now > self.began_at + due * self.interval_s:
            due = max(due, math.floor((now - self.began_at) / self.interval_s))
        self.beats = due


def renewals_inside_lease(lease_ttl_s: float, interval_s: float, delay_s: float = 0.0) -> int:
    """How many renewals, one every `interval_s` from a grant and arriving `delay_s` after their beat, land before the lease
    granted then runs out (`lease_ttl_s` later): floor((TTL - d) / I), one fewer when the last lands exactly at expiry."""
    if interval_s <= 0 or lease_ttl_s <= delay_s:
        return 0
    count = math.floor((lease_ttl_s - delay_s) / interval_s)
    if count and math.isclose(count * interval_s + delay_s, lease_ttl_s, rel_tol=0.0, abs_tol=1e-12):
        count -= 1
    return count
