"""The heartbeat's cadence: a fixed schedule from the claim, no burst after a pause, and the docs' count of renewals per lease."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from shiftchange.agent import Cadence, renewals_inside_lease

MILLIS = st.integers(min_value=1, max_value=20_000)


def arrivals_inside(ttl: Fraction, interval: Fraction, delay: Fraction) -> int:
    """Walk the cadence from a grant at 0 and count the renewals that arrive, `delay` after their beat, before 0 + TTL."""
    cadence = Cadence(began_at=Fraction(0), interval_s=interval)
    count = 0
    while (at := cadence.next_at()) + delay < ttl:
        cadence.beat(at)
        count += 1
    return count


@settings(deadline=None)
@given(ttl_ms=MILLIS, interval_ms=st.integers(min_value=50, max_value=20_000), delay_ms=st.integers(min_value=0, max_value=5_000))
def test_the_renewals_that_land_inside_a_lease_are_floor_of_ttl_less_delay_over_interval(ttl_ms, interval_ms, delay_ms):
    ttl, interval, delay = Fraction(ttl_ms, 1000), Fraction(interval_ms, 1000), Fraction(delay_ms, 1000)
    assert renewals_inside_lease(ttl, interval, delay) == arrivals_inside(ttl, interval, delay)


def test_the_formula_on_the_defaults_the_docs_use():
    assert renewals_inside_lease(30.0, 10.0, 0.05) == 2  # two renewals land; one may be lost before the lease runs out
    assert renewals_inside_lease(30.0, 10.0, 0.0) == 2  # TTL a multiple of I: the third arrives exactly at expiry
    assert renewals_inside_lease(3.0, 1.0, 5.0) == 0


@given(interval_ms=MILLIS, pause_ms=st.integers(min_value=0, max_value=100_000), sent=st.integers(min_value=0, max_value=50))
def test_a_pause_swallows_the_beats_it_covered_and_the_cadence_goes_on(interval_ms, pause_ms, sent):
    interval = Fraction(interval_ms, 1000)
    cadence = Cadence(began_at=Fraction(0), interval_s=interval)
    for _beat in range(sent):
        cadence.beat(cadence.next_at())
    woke = cadence.next_at() + Fraction(pause_ms, 1000)  # frozen from the beat that was due until now
    cadence.beat(woke)
    following = cadence.next_at()
    assert following > woke  # nothing swallowed is sent late in a burst
    assert following - woke <= interval  # and the next beat keeps the cadence from the claim
    assert (following - cadence.began_at) % interval == 0
