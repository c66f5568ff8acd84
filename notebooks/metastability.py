# %% [markdown]
# # Metastability: where does the core recover from a trigger, and where does nothing?
#
# **Question.** The retry-storm notebook shows the core's defaults recovering from one slowdown in one world. Over
# a *family* of worlds (offered load, each kind of trigger and its duration, short and long call deadlines, a
# provider that does or does not work on for callers that gave up), where does a world with no retry discipline
# go metastable, what does it take to get it back, and do the core's defaults recover everywhere the same world
# without the trigger holds up?
#
# **Published results this checks.**
# - Bronson et al., "Metastable Failures in Distributed Systems" (HotOS 2021): a metastable failure is a *stable*
#   bad state, so (a) below some trigger size the system comes back by itself and above it it does not, and
#   (b) removing the trigger is not enough: the load must be brought *below* where the system was stable before
#   (hysteresis) for it to leave the bad state.
# - Huang et al., "Metastable Failures in the Wild" (OSDI 2022): their retry reproduction has a trigger-duration
#   threshold (a 10 s trigger tips it where 9 s does not) that moves with load, and lowering the load by about
#   30% averts the failure.
#
# **How it is measured.** `shiftchange.lab.phase` plays every cell of a map twice per seed, as a *control* with no
# trigger and as the *triggered* run, and judges both from their time series: *overloaded* when the control
# itself falls (for its demand), *recovers* when the triggered run's goodput after the bound is back at the
# control's, *metastable* otherwise. Every run is also judged by every invariant.

# %% tags=["parameters"]
SCALE = "full"

# %%
# %matplotlib inline
# The maps' figures are drawn without pyplot (`PhaseMap.figure()` leaves the caller's backend alone); the inline backend
# is what registers a PNG form for a displayed Figure, so without it `display` shows only `<Figure size ...>`.
from IPython.display import display

from shiftchange.lab.phase import METASTABLE, OVERLOADED, RECOVERS, Family, Judging, peak_goodput_per_s, phase
from shiftchange.sim import scenario_config

JOBS = 2
WORLD = scenario_config("retry-storm", 0)
PEAK = peak_goodput_per_s(WORLD.model_provider)
SIZES = {
    "ci": {
        "seeds": (0,),
        "loads": (0.08, 0.12),
        "durations": (15.0, 120.0),
        "steps": (0.1, 0.015),
        "family": Family(
            arrival_rates_per_s=(0.05, 0.11),
            trigger_durations_s=(15.0, 120.0),
            call_deadlines_s=(12.0, 30.0),
            works_past_deadline=(True,),
            seeds=(0,),
        ),
    },
    "full": {
        "seeds": (0, 1, 2),
        "loads": (0.06, 0.08, 0.1, 0.12),
        "durations": (15.0, 30.0, 60.0, 90.0, 120.0),
        "steps": (0.1, 0.06, 0.03, 0.015),
        "family": Family(),
    },
}[SCALE]
print(f"scale {SCALE}; the model provider's peak goodput is {PEAK:.2f} calls/s (12 calls in progress)")

# %% [markdown]
# ## 1. No discipline: a trigger-duration threshold that moves with load
#
# The `none` discipline is the retry-storm anti-pattern's: no backoff, no circuit breaker, no retry budget, no
# concurrency limit. The trigger is the retry-storm scenario's slowdown (every call four times the work), for
# 15 s to 2 min, at offered loads from 0.06 to 0.12 tasks/s (the provider busy at about a quarter to a half of
# its peak before the trigger).

# %%
SLOWDOWN = "slowdown model_provider at=400 for=60 factor=4"
threshold = phase(
    {"trigger.for_s": SIZES["durations"], "workload.arrival_rate_per_s": SIZES["loads"]},
    [SLOWDOWN],
    ["none"],
    SIZES["seeds"],
    jobs=JOBS,
)
display(threshold.figure())
threshold_status = threshold.status()
for load in SIZES["loads"]:
    row = [threshold_status[(duration, load)] for duration in SIZES["durations"]]
    print(
        f"load {load:>5} tasks/s: "
        + "  ".join(f"{duration:>5g} s {status:<10}" for duration, status in zip(SIZES["durations"], row, strict=True))
    )

# %% [markdown]
# ## 2. Hysteresis: lowering the load ends the bad state, but only far below where it started
#
# A provider that refuses work beyond 150 calls in progress (`model_provider.queue_max`), so its abandoned work is
# bounded. The world runs at 0.1 tasks/s (stable without a trigger), takes a two-minute slowdown, and at 1,200 s,
# long after the trigger has ended, its demand is lowered to a new rate for the rest of the run. At the lowest rates a
# minute holds a handful of calls, so the late span is judged at half the control's goodput, not 0.8: the outcomes are
# far apart (a world still down answers under a tenth of its control's calls; one that came back, three quarters or more).

# %%
STEP = {"workload.arrival_rate_per_s": 0.1, "workload.arrival_rate_changes_at_s": 1200.0, "model_provider.queue_max": 150}
hysteresis = phase(
    {"workload.arrival_rate_later_per_s": SIZES["steps"]},
    ["slowdown model_provider at=400 for=120 factor=4"],
    ["none"],
    SIZES["seeds"],
    overrides=STEP,
    arrivals_s=4800.0,
    judging=Judging(bound_s=1500.0, goodput_fraction=0.5),
    jobs=JOBS,
)
display(hysteresis.figure())
steps = {later: status for (later,), status in hysteresis.status().items()}
for later, status in steps.items():
    print(f"demand lowered from 0.1 to {later:>6} tasks/s at 1,200 s: {status}")

# %% [markdown]
# ## 3. The core's defaults across the family
#
# The family (`shiftchange.lab.phase.Family`): offered load 0.05 to 0.11 tasks/s (up to about half the provider's
# peak), four triggers (calls that hang to their deadline, calls refused at once, a slowdown of four, a capacity
# drop to a quarter) for 15 s to 2 min, call deadlines of 12, 30 and 60 s, a provider that does and does not
# work past the deadline; recovery judged from 480 s after the trigger ends to the last arrival.

# %%
family = SIZES["family"]
defaults = family.map(["defaults"], jobs=JOBS)
print(f"{len(defaults.cells)} cells, {len(defaults.rows)} jobs ({2 * len(defaults.rows)} runs)")
counts = {status: sum(cell["status"] == status for cell in defaults.cells) for status in (RECOVERS, METASTABLE, OVERLOADED)}
print(counts)
times = [cell["recovery_s_max"] for cell in defaults.cells if cell["recovery_s_max"] is not None]
print(f"slowest recovery {max(times):g} s after the trigger ended")
sample = defaults.where({"agent.call_deadline_s": family.call_deadlines_s[0], "model_provider.works_past_deadline": True})
display(sample.figure())

# %% [markdown]
# ## Claims

# %%
loads, durations = SIZES["loads"], SIZES["durations"]
for load in loads:
    row = [threshold_status[(duration, load)] for duration in durations]
    assert row[0] == RECOVERS, f"with no discipline a {durations[0]:g} s trigger should pass at load {load}: {row}"
    assert row[-1] == METASTABLE, f"with no discipline a {durations[-1]:g} s trigger should tip load {load} for good: {row}"
    tipped = row.index(METASTABLE)
    assert all(status == METASTABLE for status in row[tipped:]), f"past the threshold every longer trigger tips it: {row}"


def threshold_s(load: float) -> float:
    """The shortest trigger that leaves the world metastable at this load."""
    return next(duration for duration in durations if threshold_status[(duration, load)] == METASTABLE)


assert threshold_s(min(loads)) >= threshold_s(max(loads)), "at lower load it takes at least as long a trigger to tip it"
print("thresholds (s) by load:", {load: threshold_s(load) for load in loads})

# %%
levels = SIZES["steps"]
assert steps[levels[0]] == METASTABLE, f"back at the load it was stable at before the trigger, the world stays down: {steps}"
assert steps[levels[-1]] == RECOVERS, f"far enough below, the world comes back: {steps}"
recovering = [later for later in levels if steps[later] == RECOVERS]
assert max(recovering) <= 0.5 * levels[0], f"it must go far below where it started to recover (hysteresis): {steps}"
share = max(recovering) / levels[0]
print(f"the world recovers only with demand at or below {max(recovering)} tasks/s, {share:.0%} of the load it was stable at")

# %%
stable = [cell for cell in defaults.cells if cell["status"] != OVERLOADED]
assert stable, "the family has cells whose control holds up"
assert all(cell["status"] == RECOVERS for cell in stable), [cell for cell in stable if cell["status"] != RECOVERS][:3]
assert defaults.all_invariants_held(), "every run of the defaults held every invariant"
escalated_by_trigger = max(cell["escalated_triggered_mean"] - cell["escalated_control_mean"] for cell in defaults.cells)
print(f"the defaults recover in all {len(stable)} cells whose control holds up")
print(f"a trigger escalated at most {escalated_by_trigger:g} more tasks per run than its control (a cell's mean)")

# %% [markdown]
# ## Reading the figures
#
# With no discipline the threshold is sharp: a short trigger is absorbed, a long one leaves the provider holding
# more abandoned work than it can ever drain while timed-out calls are retried at once, and it never comes back
# although the trigger is gone and the world without it serves the same load. Lower load moves the threshold
# out. Lowering the load after the fact does end the bad state, but only far below the load at which the world
# was healthy before: the bad state sustains itself. The core's defaults (backoff with jitter, a breaker that
# ramps calls back in, a retry budget, an adaptive concurrency limit per dependency, and held-back calls that
# wait rather than fail) recover in every cell of the family whose control holds up: the concurrency limit
# keeps the calls in progress near what the provider answers, so the abandoned work never builds up.
