"""rlprof: hierarchical timers that follow a trainer into its subprocesses."""
