"""The `shiftchange` command line: one entry point fronting the spec, the stores, the simulator, the explorer, the lab and the runtime.

`main` parses and dispatches (exit 0, 1, 2 or 130, an error in one line); each other module adds one family of
commands: `spec_diff` and `mutate` (spec diff, spec mutate), `sweep`, `phase` and `tune` (sim sweep, phase, tune),
`explore`, `check_store`, `operator` (status, timeline), `runtime` (worker, orchestrator, provider, db) and `chaos`.
"""
