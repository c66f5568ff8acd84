"""The exhaustive driver: every interleaving of a small configuration, its workers the agent."""
