# %% [markdown]
# # Backoff under contention: which strategy wastes least work and time?
#
# **Question.** When many clients race to update one record, and every client that loses the
# race backs off and tries again, how much work (calls) and how much time does each of the
# project's five backoff strategies (`none`, `exponential`, `full_jitter`, `equal_jitter`,
# `decorrelated_jitter`, in `shiftchange.core.backoff`) take to get every client through?
#
# **The published result it checks.** Marc Brooker, "Exponential Backoff And Jitter", AWS
# Architecture Blog, 4 March 2015
# (<https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/>). He simulates
# N clients updating one row under optimistic concurrency control and plots total calls ("work")
# and time to completion against N. His findings, as the article gives them:
#
# - with no backoff at all, the work grows with the square of the number of clients;
# - capped exponential backoff without jitter is the clear loser: more work and more time than
#   any of the jittered strategies;
# - among the jittered ones, equal jitter does slightly more work than full jitter and takes
#   much longer;
# - full jitter does the least work; decorrelated jitter does a little more work than full jitter
#   but takes slightly less time.
#
# The last cells assert each of these on this notebook's own runs.

# %%
import random

import matplotlib.pyplot as plt
import pandas as pd

from shiftchange.core import Backoff, BackoffConfig
from shiftchange.lab.contention import BASE_S, CAP_S, RaceConfig, contend

# %% tags=["parameters"]
SCALE = "full"

# %%
SIZES = {
    "ci": dict(clients=(10, 50, 100), seeds=50),
    "full": dict(clients=tuple(range(10, 101, 10)), seeds=100),
}[SCALE]
STRATEGIES = ("none", "exponential", "full_jitter", "equal_jitter", "decorrelated_jitter")
JITTERED = ("full_jitter", "equal_jitter", "decorrelated_jitter")
NETWORK = RaceConfig()

# %% [markdown]
# ## The model
#
# `shiftchange.lab.contention` rebuilds Brooker's experiment in simulated time (its module
# docstring states the model in full):
#
# - One record holds a version number and answers every request the instant it arrives. There
#   is no service time and no queue: all the time in the model is network time.
# - Every one-way trip between a client and the record takes a fresh draw of |normal(mean, sd)|,
#   Brooker's 10 ms and 2 ms.
# - Every client starts at time 0: it reads the version, then sends a conditional write carrying
#   it. The write succeeds, and bumps the version, only if no other write succeeded in between,
#   after this client's read reached the record and before its write did. Otherwise it is a
#   conflict and changes nothing.
# - A client that succeeded is done. A client that conflicted waits for the reply, then for its
#   strategy's next backoff (the core's `Backoff`, retry 0 first, from its own seeded random
#   generator), then reads again.
# - Backoff base and cap are Brooker's, 5 ms and 2 s.
#
# Work is the number of conditional writes sent (each comes after one read); completion time
# is when the last client hears that its write succeeded. Every point below is the mean over
# the seeds, the same seeds for every strategy.

# %%
print(f"network: one-way trip |normal({NETWORK.network_mean_s * 1000:g} ms, {NETWORK.network_sd_s * 1000:g} ms)|")
print(f"backoff: base {BASE_S * 1000:g} ms, cap {CAP_S:g} s")
print(f"scale {SCALE}: clients {', '.join(map(str, SIZES['clients']))}; {SIZES['seeds']} seeds per point")

# %% [markdown]
# What the five strategies wait, for one client that keeps losing: the first eight backoffs in
# milliseconds, drawn from one seeded generator per strategy. Exponential's waits are the same
# for every client that lost in the same round, which is what keeps such clients in step.


# %%
def first_waits_ms(strategy: str, retries: int = 8) -> list[float]:
    backoff = Backoff(BackoffConfig(strategy=strategy, base_s=BASE_S, cap_s=CAP_S), random.Random(0))
    return [round(backoff.delay_s(retry) * 1000, 1) for retry in range(retries)]


print(pd.DataFrame({strategy: first_waits_ms(strategy) for strategy in STRATEGIES}).rename_axis("retry").to_string())

# %% [markdown]
# ## The races

# %%
races = contend(clients=SIZES["clients"], strategies=STRATEGIES, seeds=range(SIZES["seeds"]), base_s=BASE_S, cap_s=CAP_S, config=NETWORK)
means = races.groupby(["clients", "strategy"])[["calls", "completion_s"]].mean()
calls = means["calls"].unstack("strategy")[list(STRATEGIES)]
time_s = means["completion_s"].unstack("strategy")[list(STRATEGIES)]
assert (races.groupby(["strategy", "clients"]).size() == SIZES["seeds"]).all()
LARGEST, SMALLEST = max(SIZES["clients"]), min(SIZES["clients"])

# %%
figure, (calls_axes, time_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
for strategy in STRATEGIES:
    calls_axes.plot(calls.index, calls[strategy], marker="o", label=strategy)
    time_axes.plot(time_s.index, time_s[strategy], marker="o", label=strategy)
calls_axes.set(title="Work: conditional writes sent", xlabel="clients", ylabel="calls (mean over seeds)")
time_axes.set(title="Time until the last client succeeds", xlabel="clients", ylabel="seconds (mean over seeds, log scale)", yscale="log")
for axes in (calls_axes, time_axes):
    axes.grid(True, alpha=0.3)
calls_axes.legend()
figure.suptitle(f"{len(STRATEGIES)} backoff strategies racing for one record ({SIZES['seeds']} seeds per point)")
figure.tight_layout()
plt.show()

# %% [markdown]
# Means over the seeds at every client count, and at the largest count each strategy's work and
# time relative to full jitter's.

# %%
table = pd.concat({"calls": calls.round(1), "completion_s": time_s.round(3)}, axis=1)
print(table.to_string())
print()
largest = pd.DataFrame(
    {
        "calls": calls.loc[LARGEST].round(1),
        "calls / full_jitter": (calls.loc[LARGEST] / calls.loc[LARGEST, "full_jitter"]).round(2),
        "completion_s": time_s.loc[LARGEST].round(3),
        "time / full_jitter": (time_s.loc[LARGEST] / time_s.loc[LARGEST, "full_jitter"]).round(2),
    }
)
print(f"at {LARGEST} clients:")
print(largest.to_string())

# %% [markdown]
# ## What the figures show
#
# - **No backoff** sends the most writes by far, and the gap widens with the number of clients:
#   every loser is straight back in the next round. Yet in this model it finishes first. The
#   record has no capacity limit, so the wasted writes cost nobody anything, and not waiting
#   can only save time. In a real database those writes are load that slows every client,
#   which is why Brooker counts work as the cost that matters.
# - **Exponential without jitter** is the clear loser of the backoffs. Clients that lost in the
#   same round wait exactly as long as each other and come back together, so they collide
#   again; only the network's small spread separates them. Their waits climb to the 2 s cap, so
#   each of those crowded rounds costs seconds: hence the time panel's log scale.
# - **The jittered strategies** spread each crowd of losers across the wait, so fewer collide.
#   Full jitter draws from the whole interval from zero, equal jitter only from its upper half,
#   so equal jitter's clients wait longer for about the same spreading.
# - **Full jitter against decorrelated jitter**: decorrelated jitter's waits grow from the
#   previous wait rather than the retry count, and its first wait is never shorter than the
#   base, while full jitter's can be close to zero. With few clients those longer early waits
#   avoid collisions, so decorrelated jitter does *less* work than full jitter there; as the
#   crowd grows it does a little more work, as the article reports, while finishing sooner.
#   Where the two cross depends on the early waits (Brooker's simulator counts the first retry
#   as 1, not 0, which doubles full jitter's first ceiling), so the article's ordering of work
#   is checked at the largest client count.

# %%
crossing = [clients for clients in calls.index if calls.loc[clients, "decorrelated_jitter"] > calls.loc[clients, "full_jitter"]]
print(f"decorrelated jitter does more work than full jitter at: {', '.join(map(str, crossing)) or 'no client count run'}")

# %% [markdown]
# ## The claims
#
# The article's words are read with these thresholds: "slightly" or "a little" more is more,
# but by less than a fifth; "much longer" is at least a quarter longer; "far worse" is more
# than twice. Orderings between strategies that the article states in general are checked at
# every client count run; the ones about the largest crowds are checked at the largest count.

# %%
SLIGHTLY_MORE_RATIO_MAX = 1.2
MUCH_LONGER_RATIO_MIN = 1.25
FAR_WORSE_RATIO_MIN = 2.0


def at(frame: pd.DataFrame, clients: int, strategy: str) -> float:
    return float(frame.loc[clients, strategy])


# %%
# Exponential backoff without jitter is the clear loser: more work and more time than every jittered strategy, at every count.
for clients in calls.index:
    for strategy in JITTERED:
        assert at(calls, clients, "exponential") > at(calls, clients, strategy), (
            f"at {clients} clients exponential sent {at(calls, clients, 'exponential'):.1f} calls, "
            f"not more than {strategy}'s {at(calls, clients, strategy):.1f}"
        )
        assert at(time_s, clients, "exponential") > at(time_s, clients, strategy), (
            f"at {clients} clients exponential took {at(time_s, clients, 'exponential'):.3f} s, "
            f"not longer than {strategy}'s {at(time_s, clients, strategy):.3f} s"
        )

# %%
# Equal jitter does slightly more work than full jitter and takes longer at every count; much longer at the largest.
for clients in calls.index:
    ratio = at(calls, clients, "equal_jitter") / at(calls, clients, "full_jitter")
    assert 1 < ratio < SLIGHTLY_MORE_RATIO_MAX, (
        f"at {clients} clients equal jitter sent {at(calls, clients, 'equal_jitter'):.1f} calls against full jitter's "
        f"{at(calls, clients, 'full_jitter'):.1f} (x{ratio:.2f}): not slightly more"
    )
    assert at(time_s, clients, "equal_jitter") > at(time_s, clients, "full_jitter"), (
        f"at {clients} clients equal jitter took {at(time_s, clients, 'equal_jitter'):.3f} s, "
        f"not longer than full jitter's {at(time_s, clients, 'full_jitter'):.3f} s"
    )
ratio = at(time_s, LARGEST, "equal_jitter") / at(time_s, LARGEST, "full_jitter")
assert ratio >= MUCH_LONGER_RATIO_MIN, (
    f"at {LARGEST} clients equal jitter took {at(time_s, LARGEST, 'equal_jitter'):.3f} s against full jitter's "
    f"{at(time_s, LARGEST, 'full_jitter'):.3f} s (x{ratio:.2f}): not much longer"
)

# %%
# Full jitter does the least work of all five at the largest count.
others = {strategy: at(calls, LARGEST, strategy) for strategy in STRATEGIES if strategy != "full_jitter"}
assert at(calls, LARGEST, "full_jitter") < min(others.values()), (
    f"at {LARGEST} clients full jitter sent {at(calls, LARGEST, 'full_jitter'):.1f} calls; the others: {others}"
)

# %%
# Decorrelated jitter: a little more work than full jitter but less time, at the largest count.
ratio = at(calls, LARGEST, "decorrelated_jitter") / at(calls, LARGEST, "full_jitter")
assert 1 < ratio < SLIGHTLY_MORE_RATIO_MAX, (
    f"at {LARGEST} clients decorrelated jitter sent {at(calls, LARGEST, 'decorrelated_jitter'):.1f} calls against full jitter's "
    f"{at(calls, LARGEST, 'full_jitter'):.1f} (x{ratio:.2f}): not a little more"
)
assert at(time_s, LARGEST, "decorrelated_jitter") < at(time_s, LARGEST, "full_jitter"), (
    f"at {LARGEST} clients decorrelated jitter took {at(time_s, LARGEST, 'decorrelated_jitter'):.3f} s, "
    f"not less than full jitter's {at(time_s, LARGEST, 'full_jitter'):.3f} s"
)

# %%
# No backoff at all is far worse in work: more than exponential, and more than twice full jitter, at the largest count.
assert at(calls, LARGEST, "none") >= at(calls, LARGEST, "exponential"), (
    f"at {LARGEST} clients no backoff sent {at(calls, LARGEST, 'none'):.1f} calls, fewer than exponential's "
    f"{at(calls, LARGEST, 'exponential'):.1f}"
)
ratio = at(calls, LARGEST, "none") / at(calls, LARGEST, "full_jitter")
assert ratio > FAR_WORSE_RATIO_MIN, (
    f"at {LARGEST} clients no backoff sent {at(calls, LARGEST, 'none'):.1f} calls against full jitter's "
    f"{at(calls, LARGEST, 'full_jitter'):.1f} (x{ratio:.2f}): not far worse"
)

# %%
# This model's own findings, stated above: no backoff finishes first at every count (the record has no capacity
# limit), and at the smallest count decorrelated jitter does less work than full jitter.
for clients in time_s.index:
    assert time_s.loc[clients].idxmin() == "none", (
        f"at {clients} clients the fastest strategy was {time_s.loc[clients].idxmin()} ({time_s.loc[clients].min():.3f} s), "
        f"not none ({at(time_s, clients, 'none'):.3f} s)"
    )
assert at(calls, SMALLEST, "decorrelated_jitter") < at(calls, SMALLEST, "full_jitter"), (
    f"at {SMALLEST} clients decorrelated jitter sent {at(calls, SMALLEST, 'decorrelated_jitter'):.1f} calls, "
    f"not fewer than full jitter's {at(calls, SMALLEST, 'full_jitter'):.1f}"
)
