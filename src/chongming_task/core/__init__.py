"""Core building blocks: the clock and the state machine (no I/O, no threads)."""
