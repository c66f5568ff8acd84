"""The reference core: records, contracts, stores and policy, sans-I/O (lands with the core issue)."""
