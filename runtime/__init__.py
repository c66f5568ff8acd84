"""The real runtime: the reference core run by OS processes against real providers over HTTP.

`codehost` is the provider side: a small HTTP server on loopback that hosts
the simulator's two dependencies (`code_host`, `model_provider`), lands every
effect in a JSON-lines ledger on disk before it answers, and has fault
switches a chaos harness turns on and off; and `HttpProvider`, the client
adapter workers and the orchestrator use to reach it.
"""
