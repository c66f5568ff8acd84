# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Design review: running a proposed change
#
# **The proposal.** "A worker whose lease ran out but that finished its work anyway should be allowed to report
# completion, as long as nobody else has taken the task over: why throw away finished work?" A peer system, Absurd, does
# exactly this. The chapter this project implements calls such a worker the *stale worker*, and the shipped table refuses
# its completion: once the reaper finds a lease expired, the Attempt is Suspect, and the only way on from Suspect is
# reconciliation (`spec/attempt.toml`: from `suspect`, the rows `reconcile` and `cancel` lead on, both through
# Reconciling).
#
# **The question.** What does the table change do when it runs, and what should a reviewer conclude? This notebook
# reviews it the way `docs/design-review.md` describes: write the change as an edit of a copy of `spec/`, put the
# proposal and the shipped table on trial side by side (`spec diff --run`, here its Python API
# `shiftchange.lab.compare.compare`), read the shortest counterexample and write the review page with its section
# "What this change does". It does that twice, because the proposal comes in two versions:
#
# 1. the row as someone copying the shipped `complete` row would write it: fenced, with the guard `lease_current`;
# 2. the "fix" once the first version turns out never to fire: the same row unfenced, without `lease_current`.
#
# The last cells assert what the trials found.

# %%
import difflib
import shlex
import shutil
import tempfile
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from shiftchange.explore import parse_steps, replay
from shiftchange.lab import CHECKS, Scale, run_trial
from shiftchange.lab.compare import compare
from shiftchange.lab.trial import explore_config
from shiftchange.spec.checker import check_spec
from shiftchange.spec.loader import FILES, load_spec
from shiftchange.spec.review import write_review

# %% tags=["parameters"]
SCALE = "full"

# %%
SCALES = {
    # The two configurations that reach an expired lease: a worker paused past its lease, and one that crashed.
    "ci": Scale(explore=("workers=2 pauses=1", "workers=2 crashes=1"), scenarios=(), seeds=()),
    # `spec diff --run`'s defaults: eight explored configurations, and the simulator's four scenarios (lab.trial.DEFAULT_SCENARIOS).
    "full": Scale(),
}
TRIAL = SCALES[SCALE]
print(f"scale {SCALE}:")
print("\n".join(f"  {line}" for line in TRIAL.lines()))

# %% [markdown]
# ## The reviewer's workspace
#
# A scratch folder laid out as a checkout would be: `spec/` holds the shipped table, and each version of the proposal is
# a copy of it with one row appended to `attempt.toml`, written as TOML text the way its author would write it. The
# labels the trials get are these folder names, so every replay command printed below runs in this folder as printed.

# %%
SHIPPED = Path(str(files("shiftchange.spec")))
WORKSPACE = tempfile.TemporaryDirectory(prefix="design-review-")  # removed when the kernel exits
WORK = Path(WORKSPACE.name)


def shown(text: str) -> str:
    """`text` with the scratch folder's path left out: file names as a reviewer in the workspace reads them."""
    return text.replace(f"{WORK}/", "")


def spec_copy(name: str, appended: str = "") -> Path:
    """A copy of the shipped spec files in WORK/`name`, with `appended` added at the end of attempt.toml."""
    folder = WORK / name
    folder.mkdir()
    for file in FILES.values():
        shutil.copy(SHIPPED / file, folder / file)
    if appended:
        with open(folder / FILES["attempt"], "a", encoding="utf-8") as attempt:
            attempt.write(appended)
    return folder


base = load_spec(spec_copy("spec"))
shipped_complete = next(row for row in base.attempt.rows if row.trigger == "complete")
print(f"the shipped complete row ({len(base.attempt.rows)} attempt rows in all):")
print(f"  {shown(shipped_complete.label())}, guards {list(shipped_complete.guards)}, effects {list(shipped_complete.effects)}")
print(f"  fenced {shipped_complete.fenced}")

# %% [markdown]
# ## Version 1: the row as copied
#
# The author copies the shipped `complete` row and changes its source to `suspect`: same actor, same effects, fenced,
# and guarded by `lease_current`, as every other worker row is.

# %%
ROW_V1 = """
# A stale worker that finished its work may still report it (the proposal).
[[transition]]
trigger = "complete"
source = "suspect"
dest = "verifying"
actor = "worker"
guards = ["lease_current"]
effects = ["record_result", "revoke_authority"]
fenced = true
"""
v1 = load_spec(spec_copy("proposal-v1", ROW_V1))
NEW_ROW = len(v1.attempt.rows) - 1  # the appended row's position: the last
print(f"proposal-v1: attempt row {NEW_ROW + 1} added: {shown(v1.attempt.rows[NEW_ROW].label())}")

# %% [markdown]
# From a checkout, with the proposal in `proposal-v1/`, the reviewer would run (the `--explore` and `--scenarios` flags
# give the CI scale; without them the defaults are the full scale's):
#
# ```
# shiftchange spec diff spec proposal-v1 --run --explore 'workers=2 pauses=1' --explore 'workers=2 crashes=1' --scenarios none
# ```
#
# Here the same trial runs through the Python API, and prints what the command prints after the structural diff.

# %%
first = compare(base, v1, TRIAL, base_label="spec", proposal_label="proposal-v1")
print("\n".join(first.lines()))

# %% [markdown]
# One verdict moves, and it is a structural one: `spec check`'s `suspect_then_reconcile` reads the table as a graph and
# finds a path from an expired lease (`expire`) to a terminal state that skips Reconciling:
# `suspect --complete--> verifying --> ...`. The structure does not know that the row's guard can never hold there. Every
# verdict of the runs (the explorer's, and the simulator's when the scale has one) is the base's.
#
# Did the new row do anything at run time? The trial records, with `coverage=True`, how often each row fired and in which
# states a call presented each trigger.

# %%
FIRED = {}


def new_row_use(label: str, spec) -> None:
    """Print, per check that runs, how often the appended row fired, and in which states `complete` was presented.

    The states are recorded for the searches and runs played to their end without a violation (`CheckRun.presented`)."""
    trial = run_trial(spec, TRIAL, label=label, coverage=True, checks=("explore", "simulate"))
    for run in trial.checks:
        fired = run.fired["attempt"][NEW_ROW]
        presented = set().union(*run.presented.values())
        met = sorted({state for machine, trigger, state in presented if (machine, trigger) == ("attempt", "complete")})
        FIRED[label, run.check] = (fired, met)
        print(f"{label} {run.check:<8}: the new row fired {fired} time(s)")
        print(f"  complete presented in: {', '.join(met) or '-'} (in the searches and runs that ended without a violation)")


new_row_use("proposal-v1", v1)

# %% [markdown]
# The explorer's stale worker does call `complete` while its Attempt is Suspect, and the row never fires: the call is
# refused. Expiry ended the lease, and nothing in Suspect renews one, so the fence and `lease_current` refuse every such
# call, exactly as the shipped table does by having no row. **As written, version 1 is a no-op at run time.** Its only
# effect is to make the table claim a path it never takes, which `spec check` reports. At the full scale the simulator
# runs too, and its workers never present `complete` in Suspect at all (the lines above): the simulated control plane
# reconciles a Suspect Attempt at its next loop (`sim/control.py`), and in these runs every late completion came after
# that, when the Attempt had already moved on.
#
# ## Version 2: the "fix"
#
# The author notices that the row cannot fire, and reasons that the lease is gone by definition in Suspect, so asking
# for it is the bug: the row is unfenced and `lease_current` dropped.

# %%
ROW_V2 = """
# A stale worker that finished its work may still report it (the proposal).
# Its lease is gone by definition in suspect, so the row neither asks for it nor checks the fence.
[[transition]]
trigger = "complete"
source = "suspect"
dest = "verifying"
actor = "worker"
effects = ["record_result", "revoke_authority"]
"""
v2 = load_spec(spec_copy("proposal-v2", ROW_V2))
print("".join(difflib.unified_diff(ROW_V1.splitlines(True), ROW_V2.splitlines(True), "proposal-v1 (row)", "proposal-v2 (row)")))

# %% [markdown]
# The command, now also writing the review page:
#
# ```
# shiftchange spec diff spec proposal-v2 --run --explore 'workers=2 pauses=1' --explore 'workers=2 crashes=1' \
#     --scenarios none --review review/
# ```

# %%
second = compare(base, v2, TRIAL, base_label="spec", proposal_label="proposal-v2")
lines = second.lines()
verdicts_end = next(n for n, line in enumerate(lines) if line.startswith("the proposal breaks"))
print("\n".join(lines[: verdicts_end + 1]))
print()
new_row_use("proposal-v2", v2)

# %% [markdown]
# Now the row fires and the fence is gone: the explorer's `fenced_writes` is violated, and the structure check adds
# `fenced_worker_writes` (a worker row with a material effect that does not prove the fence) to
# `suspect_then_reconcile`. The explorer's other verdicts are unknown, not ok: a search stops at its first violation,
# so they were not searched to the end. When the scale runs the simulator, its verdicts stay ok: as for version 1, its
# workers never call `complete` while their Attempt is Suspect, so the row fires only in the explorer, which takes the
# pause, the reaper's step and the late completion in every order.
#
# The structural property's witnesses name every terminal state the new row reaches from an expired lease without
# Reconciling, success included:

# %%
SKIPS = next(result for result in check_spec(v2) if result.name == "attempt.suspect_then_reconcile")
print(*(f"  {shown(witness)}" for witness in SKIPS.witness), sep="\n")

# %% [markdown]
# ### The shortest counterexample
#
# The explorer searches breadth-first, so the first path it finds to a violation is a shortest one. Its steps, the
# violating task's timeline as `shiftchange timeline` draws it, and the command that replays it:

# %%
example = second.proposal.shortest("fenced_writes")
command = shlex.split(example.replay[0])
STALE_PATH = parse_steps(command[command.index("--replay") + 1])
print(f"fenced_writes: {example.size_text}, found by the {'explorer' if example.check == 'explore' else 'simulator'} in:")
print(f"  {example.found_in}")
print(*(f"  {line}" for line in example.example), sep="\n")
print()
print(*(f"  step {number:>2}  {step}" for number, step in enumerate(STALE_PATH, 1)), sep="\n")

# %%
print(example.timeline)

# %%
print("replay:")
print(*(f"  {line}" for line in example.replay), sep="\n")

# %% [markdown]
# Worker-1 claims Attempt 1, opens the pull request (the provider records it, and the worker records the receipt), then
# pauses past its lease. The reaper makes the Attempt Suspect; worker-1 wakes and completes it, and the table accepts
# the completion with no lease behind it. The Attempt's path is `running -> suspect -> verifying`: no Reconciling.
#
# ### The review page
#
# `--review DIR` writes the proposal's review page with the section "What this change does" at its top; in Python, the
# comparison's `change_run()` is that section's content.

# %%
page = write_review(v2, WORK / "review", change=second.change_run())
review_md = page.read_text(encoding="utf-8")
review_html = (page.parent / "review.html").read_text(encoding="utf-8")
section = review_md[review_md.index("## What this change does") :]
print(f"written: {page.relative_to(WORK)} and review.html, in the scratch workspace")
print()
print(section[: section.index("\n### ")].strip())

# %% [markdown]
# ## The same twelve steps under each table
#
# The counterexample is a path; the explorer's `replay` plays it in a fresh world under any table. Under the shipped
# table and under version 1, the stale worker's last step is refused, and the orchestrator goes on to reconcile.

# %%
PAUSED = explore_config("workers=2 pauses=1")
REPLAYS = {label: replay(replace(PAUSED, spec=str(WORK / label)), STALE_PATH) for label in ("spec", "proposal-v1", "proposal-v2")}
for label, replayed in REPLAYS.items():
    tail = replayed.timeline[next(n for n, line in enumerate(replayed.timeline) if line.startswith(f"step {len(STALE_PATH):>3}")) :]
    verdict = f"violates {replayed.violation.invariant}" if replayed.violation else "no violation"
    print(f"{label}: {verdict}")
    print(*(f"  {line.strip()}" for line in tail), sep="\n")
    print()

# %% [markdown]
# Was the finished work thrown away under the shipped table? The path goes on from the refused completion as the control
# plane would take it: reconciliation (which the refusal's step already ran), the loop's decision, the retry, and a
# second worker that takes Attempt 2.

# %%
RETRY = (
    "control:decide:task-1",
    "control:retry:task-1",
    "clock:advance:4.0",
    "control:admit",
    "worker-2:claim:task-1",
    "worker-2:start",
    "worker-2:grant",
    "worker-2:complete",
    "control:verify:task-1#2",
    "control:decide:task-1",
    "control:approve:task-1",
)
resumed = replay(replace(PAUSED, spec=str(WORK / "spec")), (*STALE_PATH, *RETRY))
start = next(n for n, line in enumerate(resumed.timeline) if line.startswith(f"step {len(STALE_PATH):>3}"))
print(f"spec, {len(STALE_PATH)} + {len(RETRY)} steps: {'no violation' if resumed.violation is None else resumed.violation.invariant}")
print(*(f"  {line.strip()}" for line in resumed.timeline[start:]), sep="\n")

# %% [markdown]
# Reconciliation asks the provider and records the pull request worker-1 opened (`create-pr-1`) as a finding; Attempt 1
# fails, as partial work. Attempt 2 is granted the same operation key, gets the recorded result back instead of calling
# the provider again (there is no second `perform` and no second effect), completes, and is verified on `create-pr-1`:
# the very pull request the stale worker made.

# %% [markdown]
# ## Every verdict, side by side
#
# Each check's verdict per invariant (per property, for the structure) for the shipped table and both versions.

# %%
STATUS = {"ok": 0, "unknown": 1, "violated": 2}
COLOURS = ListedColormap(["#4c9a4c", "#c9c9c9", "#c0392b"])
COLUMNS = ("spec (shipped)", "proposal-v1", "proposal-v2")
assert first.base.verdicts().keys() == second.base.verdicts().keys()
assert all(first.base.verdicts()[key].status == second.base.verdicts()[key].status for key in first.base.verdicts())
trials = (first.base, first.proposal, second.proposal)
checks = [check for check in CHECKS if any(trial.check(check) for trial in trials)]
names = {check: list(dict.fromkeys(name for c, name, *_ in (*first.verdicts, *second.verdicts) if c == check)) for check in checks}
rows = [len(names[check]) for check in checks]
figure, axes_list = plt.subplots(len(checks), 1, figsize=(8, 0.26 * sum(rows) + 1.5), gridspec_kw={"height_ratios": rows})
for axes, check in zip(np.atleast_1d(axes_list), checks, strict=True):
    grid = np.full((len(names[check]), len(trials)), np.nan)
    for column, trial in enumerate(trials):
        verdicts = trial.verdicts()
        for row, name in enumerate(names[check]):
            if (check, name) in verdicts:
                grid[row, column] = STATUS[verdicts[check, name].status]
    axes.imshow(np.ma.masked_invalid(grid), cmap=COLOURS, vmin=0, vmax=2, aspect="auto")
    for (row, column), value in np.ndenumerate(grid):
        text = "-" if np.isnan(value) else next(word for word, code in STATUS.items() if code == value)
        axes.text(column, row, text, ha="center", va="center", fontsize=8, color="white" if value == 2 else "black")
    axes.set_yticks(range(len(names[check])), names[check], fontsize=8)
    axes.set_xticks(range(len(trials)), COLUMNS if axes is np.atleast_1d(axes_list)[0] else [""] * len(trials))
    axes.xaxis.set_ticks_position("top")
    axes.tick_params(length=0)
    axes.set_ylabel(check)
figure.suptitle("Verdicts per check: the shipped table and both versions of the proposal")
figure.tight_layout()
plt.show()

# %% [markdown]
# ## What the reviewer concludes
#
# - **Version 1 changes nothing a run can see.** Expiry revoked the stale worker's authority, so a fenced row guarded by
#   `lease_current` refuses it in Suspect just as the shipped table's missing row does. The one verdict it moves is
#   structural: the table now draws a path from Suspect to Verifying that it never takes. Reject it as dead weight.
# - **Version 2 is the stale worker itself.** A worker whose lease has expired writes a result, the write
#   `fenced_writes` exists to forbid, and its Attempt reaches Verifying, and from there every terminal state, success
#   included, without Reconciling. The proposal's proviso, "as long as nobody else has taken the task over", holds
#   trivially here: while the Attempt is Suspect nobody can claim it (a retry is a new Attempt, appended after
#   reconciliation). What the row skips is the step that makes the outcome trustworthy: reconciliation's rows wait until
#   every call the Attempt made has settled (`calls_settled`) and record what landed; verification waits for neither.
#   The trial does not show that harm by itself (each search stops at its first violation, here `fenced_writes`); it is
#   the reviewer's reading of the rows the change goes around.
# - **The finished work is not lost without the change.** Reconciliation records the effects that landed (the pull
#   request, by its operation key), and the retry resumes from them: the next Attempt gets the recorded result back for
#   the same key and is verified on the same pull request. What accepting the stale completion would save is one
#   reconciliation and one retry; what it costs is the rule that nothing leaves Suspect except through Reconciling.
#
# The converse question, which parts of the shipped table any check needs at all, is `shiftchange spec mutate`
# (`docs/design-review.md`, "The loop"): it unfences, drops and moves every single point of the table, and lists every
# change no check notices.
#
# ## The claims

# %%
# Version 1 moves one verdict, the structural suspect_then_reconcile; every run-time verdict (explore, simulate) is the base's.
assert first.broken == (("structure", "attempt.suspect_then_reconcile"),), first.broken
moved = [(check, name, was, now) for check, name, was, now in first.verdicts if check != "structure" and was != now]
assert not moved, f"version 1 moved run-time verdicts: {moved}"
assert all(was == "ok" for check, _name, was, _now in first.verdicts if check != "structure"), "the base violates something"

# %%
# Version 1's row never fired, though the explorer's stale worker presented complete in suspect; the replayed stale path is
# refused by its guard, as the shipped table refuses it for want of a row.
assert all(fired == 0 for (label, _check), (fired, _met) in FIRED.items() if label == "proposal-v1"), FIRED
assert "suspect" in FIRED["proposal-v1", "explore"][1], FIRED
refused = {label: next(line for line in run.timeline if "complete task-1#1" in line) for label, run in REPLAYS.items()}
assert REPLAYS["spec"].violation is None and REPLAYS["proposal-v1"].violation is None
assert "REFUSED" in refused["spec"] and "no 'complete' from 'suspect'" in refused["spec"], refused["spec"]
assert "REFUSED" in refused["proposal-v1"] and "guard lease_current not met" in refused["proposal-v1"], refused["proposal-v1"]

# %%
# Version 2 breaks fenced_writes in the explorer and two structural properties, and nothing else.
assert set(second.broken) == {
    ("structure", "attempt.fenced_worker_writes"),
    ("structure", "attempt.suspect_then_reconcile"),
    ("explore", "fenced_writes"),
}, second.broken
assert FIRED["proposal-v2", "explore"][0] >= 1, FIRED

# %%
# Its shortest counterexample is the explorer's: the stale worker's completion accepted from suspect, with no reconciliation.
assert [e.invariant for e in second.examples] == ["fenced_writes"] and second.examples[0] == example
assert example.check == "explore" and example.size == len(STALE_PATH), example
assert STALE_PATH[-1] == "worker-1:complete" and "control:reap" in STALE_PATH
assert "suspect->verifying accepted" in example.example[-1], example.example
assert REPLAYS["proposal-v2"].violation is not None and REPLAYS["proposal-v2"].violation.invariant == "fenced_writes"
assert any("reaches succeeded without passing reconciling" in witness for witness in SKIPS.witness), SKIPS.witness
assert "running -> suspect -> verifying" in example.timeline and "reconciling" not in example.timeline, example.timeline
assert f"--spec proposal-v2 --replay '{','.join(STALE_PATH)}'" in example.replay[0], example.replay

# %%
# The review page opens with "What this change does", naming the broken verdicts and the counterexample.
assert '<section id="what-this-change-does">' in review_html
assert "explore fenced_writes" in section and "### fenced_writes: broken (explore)" in section, section[:400]

# %%
# Under the shipped table the stale worker's work is kept: reconciliation records the landed pull request, the retry's
# grant reuses its key without a second effect, and Attempt 2 is verified on it.
assert resumed.violation is None, resumed.violation
after = resumed.timeline[start:]
assert any("effects_landed task-1#1 reconciling->failed" in line and "create-pr-1" in line for line in after), after
assert sum("effect create-pr-" in line and "landed" in line for line in resumed.timeline) == 1
assert any("verified task-1#2 verifying->succeeded" in line and "create-pr-1 passed" in line for line in after), after
