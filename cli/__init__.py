"""The `shiftchange` command line: one entry point fronting spec, core and sim."""
