"""What a run records besides block times: timeline spans, instants and counters; memory samples; cores."""
