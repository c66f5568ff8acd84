"""The real runtime: the reference core run by OS processes on a wall clock, against a real provider over HTTP.

Above `core`, beside `sim`: the core stays sans-I/O, and everything that
needs a clock, a process or a socket lives here.

- `worker`: `shiftchange worker`, one process that drives the agent
  (`shiftchange.agent`) on threads and sockets: it pulls Attempts from a
  shared store, carries out the agent's commands, and heartbeats from its
  own thread, handing each renewal's answer to the agent;
- `control`: `shiftchange orchestrator`, admission (one leader, by a fenced
  lease in the store: `core.leadership`), the reaper, reconciliation,
  verification, the loop decision and review, each a scan of the store's
  states on its own cadence (the agent's `Agenda.survey`), so a restarted
  process loses nothing;
- `codehost`: `shiftchange provider`, a small HTTP server on loopback for the
  simulator's two dependencies (`code_host`, `model_provider`) that lands
  every effect in a JSON-lines ledger on disk before it answers, with fault
  switches;
- `http_provider`: `HttpProvider`, the client adapter the processes use to
  talk to it (the core's `ProviderAdapter` and the worker's call);
- `metrics`: what `--metrics-port N` serves to Prometheus (docs/metrics.md),
  fed by what the worker and the control plane already see; the
  `prometheus_client` library is an optional extra, imported only then;
- `chaos`: `shiftchange chaos`, all of them as OS processes under kills,
  pauses, cut connections, dropped responses and skewed clocks, judged by
  the checkers;
- `config`, `clock`, `workload`, `arguments`: the settings every process
  reads, the clock leases are judged by (the store's own, PostgreSQL's
  server clock, else this process's wall clock, which a skew can shift;
  and a stepping one for tests), the task submitted, the commands'
  arguments.

Nothing here imports the simulator or the conformance kit: a real run is judged
by `shiftchange.checkers.judge`.
"""
