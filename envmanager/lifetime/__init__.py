"""Process lifetime and faults: lifelines, process groups, exit hooks, permits, restarts."""
