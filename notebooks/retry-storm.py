# %% [markdown]
# # Retry storms: does goodput come back after the trigger is gone?
#
# **Question.** A model provider that is about half busy slows down four times for two minutes. When the
# slowdown ends, does its goodput (calls answered by their deadline) come back, and which retry discipline
# makes the difference: none, backoff with jitter, plus a circuit breaker, plus a retry budget?
#
# **Published results this checks.**
# - Bronson et al., "Metastable Failures in Distributed Systems" (HotOS 2021): a *trigger* pushes a system
#   past capacity, an *amplifier* turns the overload into more load, and a *sustaining effect* keeps the
#   system in its bad state after the trigger is removed. Retries of timed-out requests are the canonical
#   sustaining effect, made worse when the server keeps working on requests whose callers gave up.
# - Huang et al., "Metastable Failures in the Wild" (OSDI 2022): 22 metastable failures from 11
#   organizations, including at least 4 of 15 major AWS outages of the decade; they sort triggers into
#   load spikes and capacity decreases, and amplifiers into workload amplification (retries) and capacity
#   degradation.
# - The chapter: a retry storm is many workers recovering from one outage at once and knocking the
#   dependency over again; the fix is exponential backoff with jitter and a circuit breaker.
#
# Here the trigger is a capacity decrease (`slowdown model_provider factor=4`), the amplifier is retries of
# timed-out calls, and the sustaining effect is the provider's abandoned work: it keeps working on calls
# past their deadline (`works_past_deadline`), and past its capacity its goodput falls
# (`contention`), so every new call is slow enough to time out too.

# %% tags=["parameters"]
SCALE = "full"

# %%
SIZES = {"ci": {"seeds": range(3), "tasks": 120}, "full": {"seeds": range(20), "tasks": 300}}[SCALE]
JOBS = 2

import matplotlib.pyplot as plt
import pandas as pd

from shiftchange.lab import settings
from shiftchange.lab.sweep import sweep
from shiftchange.sim import ANTIPATTERNS, play, scenario_config
from shiftchange.sim.scenarios import STORM, STORM_TRIGGER

print(f"scale {SCALE}: {len(SIZES['seeds'])} seeds of {SIZES['tasks']} tasks per discipline")
print("trigger:", STORM_TRIGGER)
print("recovery bound:", STORM.recovery.bound_s, "s to reach", STORM.recovery.goodput_fraction, "of the goodput before")

# %% [markdown]
# ## The world
#
# The `retry-storm` scenario: open-loop arrivals (no Attempt waits for a free worker), each task a few model
# calls and tool calls; a model provider whose goodput peaks at `overload_in_flight / sqrt(contention)` calls
# in progress and falls beyond, working on past its callers' 30 s deadlines. The settings that differ from
# the simulator's defaults:

# %%
print(settings.diff(scenario_config("baseline", 0), STORM))

# %% [markdown]
# ## Five disciplines, cumulative, and one on the side
#
# Each discipline is a set of settings of the correct core. "none" is what the `retry-storm` anti-pattern
# switches to: no backoff (between Attempts or between a call's retries), no breaker, no retry budget, no
# concurrency limit. The last line, a retry budget without a breaker, is not on the cumulative path; it shows
# which control breaks the loop in this world.

# %%
OFF = {"reliability.concurrency": None}
DISCIPLINES = {
    "none": {"reliability.backoff.strategy": "none", "reliability.breaker": None, "reliability.retry_budget": None, **OFF},
    "backoff with jitter": {"reliability.breaker": None, "reliability.retry_budget": None, **OFF},
    "+ circuit breaker": {"reliability.retry_budget": None, **OFF},
    "+ retry budget": {**OFF},
    "+ concurrency limit (the defaults)": {},
    "jitter + budget, no breaker": {"reliability.breaker": None, **OFF},
}
CUMULATIVE = list(DISCIPLINES)[:5]

frames = []
for name, overrides in DISCIPLINES.items():
    frame = sweep(scenario="retry-storm", seeds=SIZES["seeds"], tasks=SIZES["tasks"], overrides=overrides, jobs=JOBS)
    frame["discipline"] = name
    frames.append(frame)
runs = pd.concat(frames, ignore_index=True)
runs["recovered"] = runs["invariant.goodput_recovers"] == "ok"
runs["goodput_ratio"] = runs["goodput_after_per_s"] / runs["goodput_before_per_s"]
table = runs.groupby("discipline", sort=False).agg(
    runs=("seed", "size"),
    recovered=("recovered", "sum"),
    recovery_s_mean=("recovery_s", "mean"),
    recovery_s_max=("recovery_s", "max"),
    goodput_after_over_before=("goodput_ratio", "mean"),
    tasks_done=("final_states.done", "mean"),
)
table

# %% [markdown]
# ## Goodput over time across the trigger
#
# One seed per discipline, its time series (one row per minute of simulated time): the model provider's
# goodput, and the work it carries for callers that had already given up.

# %%
series = {}
for name, overrides in DISCIPLINES.items():
    config = settings.apply(scenario_config("retry-storm", 0, SIZES["tasks"]), overrides)
    series[name] = pd.DataFrame(play(config, 0, "retry-storm").series)

figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
for name in DISCIPLINES:
    rows = series[name]
    style = "--" if name not in CUMULATIVE else "-"
    top.plot(rows["t_s"] / 60, rows["model_provider.answered"] / rows["window_s"], style, label=name)
    bottom.plot(rows["t_s"] / 60, rows["model_provider.abandoned"], style, label=name)
for axis in (top, bottom):
    axis.axvspan(STORM_TRIGGER.at_s / 60, STORM_TRIGGER.until_s / 60, color="grey", alpha=0.2)
top.set_ylabel("goodput (calls answered in time / s)")
bottom.set_ylabel("abandoned calls in progress")
bottom.set_xlabel("simulated minutes (grey: the slowdown)")
top.legend(fontsize=8)
top.set_title("model provider across a two-minute slowdown, seed 0")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## What the anti-pattern's checker saw
#
# The `retry-storm` anti-pattern in its scenario: the `goodput_recovers` verdict names the sustaining
# effects it found in the series after the trigger.

# %%
pattern = ANTIPATTERNS["retry-storm"]
storm = play(scenario_config(pattern.scenario, 0, SIZES["tasks"]), 0, pattern.scenario, pattern)
verdict = storm.verdicts[pattern.invariant]
print(pattern.invariant, verdict.status)
for line in verdict.example:
    print(" ", line)

# %% [markdown]
# ## Claims

# %%
stuck = table.loc[["none", "backoff with jitter"]]
assert (stuck["recovered"] <= 0.2 * stuck["runs"]).all(), f"without a breaker the storm should persist in most runs:\n{stuck}"
assert (stuck["goodput_after_over_before"] < 0.3).all(), f"goodput after the trigger should stay far below before:\n{stuck}"
print(
    "without a breaker: runs recovered",
    stuck["recovered"].tolist(),
    "of",
    stuck["runs"].tolist(),
    "; goodput after / before",
    stuck["goodput_after_over_before"].round(3).tolist(),
)

# %%
defended = table.loc[["+ circuit breaker", "+ retry budget", "+ concurrency limit (the defaults)"]]
bound_s = STORM.recovery.bound_s
breaker, defaults = defended.loc["+ circuit breaker"], defended.loc["+ concurrency limit (the defaults)"]
assert breaker["recovered"] >= 0.8 * breaker["runs"], f"with a breaker most runs should recover:\n{defended}"
assert defaults["recovered"] == defaults["runs"], f"with the defaults every run should recover:\n{defended}"
assert defaults["recovery_s_max"] <= bound_s, f"with the defaults, recovery within {bound_s} s:\n{defended}"
print(
    "with a breaker: runs recovered",
    defended["recovered"].tolist(),
    "of",
    defended["runs"].tolist(),
    "; mean / max recovery",
    defended["recovery_s_mean"].round(0).tolist(),
    defended["recovery_s_max"].tolist(),
    "s",
)

# %%
defaults = table.loc["+ concurrency limit (the defaults)"]
none = table.loc["none"]
assert defaults["tasks_done"] >= 2 * none["tasks_done"], (
    f"the defaults should finish at least twice the tasks: {defaults['tasks_done']} vs {none['tasks_done']}"
)
print(f"tasks done per run: {defaults['tasks_done']:.1f} with the defaults, {none['tasks_done']:.1f} with no discipline")

# %%
alone = table.loc["jitter + budget, no breaker"]
assert alone["recovered"] >= 0.8 * alone["runs"], f"a retry budget whose held-back calls wait should break the loop here:\n{alone}"
print(f"retry budget without a breaker: {alone['recovered']} of {alone['runs']} runs recovered")

# %%
assert verdict.status == "violated", verdict
named = " ".join(verdict.example)
assert "retry amplification" in named and "abandoned work" in named, named
print("the anti-pattern is caught by goodput_recovers, naming retry amplification and abandoned work")

# %% [markdown]
# ## Reading the figures
#
# Without a breaker the provider rarely comes back (in a few runs the trigger is not enough to tip it).
# Every timed-out call is retried, the calls whose callers gave up stay in progress, and with more calls in
# progress than its capacity the provider answers almost nothing in time, so new calls time out as well.
# Backoff with jitter paces each call's retries but does not remove the abandoned work, and here it changes
# little. The breaker is what breaks the loop: after a run of timeouts it stops every call, first calls
# included, long enough for the abandoned work to drain, then lets a probe through. With the breaker alone
# most runs recover; with the retry budget and the adaptive concurrency limit as well (the core's defaults)
# every run does, within the bound. A retry budget alone (the dashed line) now breaks the loop as well: a
# retry it holds back waits inside its Attempt and spends none of the Attempt's asks, so the Attempt does not
# fail into a successor whose fresh first calls would feed the abandoned work. (Before held-back calls waited,
# they used up their asks, and the budget alone recovered in at most a quarter of the runs.) This is one world
# and one trigger; `notebooks/metastability` maps where the defaults recover across a family of worlds, and
# where a world with no discipline does not.
