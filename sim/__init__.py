"""The SimPy world that attacks the core (lands with the simulator issue)."""
