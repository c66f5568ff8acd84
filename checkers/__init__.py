"""The invariant checkers: pure folds over one history, shared by the simulator, the runtime and the conformance kit.

A history is core `Event`s (every contract call, accepted or refused) with
three kinds of entry a store cannot see (`history.Landed`: an effect at a
provider; `history.Fault`: what broke and until when; `history.Retired`: a
task's final records). `rules` holds one checker per invariant of
`spec/invariants.toml`; each folds entries and gives a `Verdict` (ok,
violated with the entries that show it, or unknown).

They belong to no world: nothing here imports SimPy, the simulator or the
runtime, and the rules read only the core's record types, so they judge the
core rather than repeat it. `shiftchange.sim` feeds them a simulated run as it
plays; `shiftchange.testing.judge` feeds them any store's history and a
provider's ledger, which is how `shiftchange chaos` judges real processes.
"""
