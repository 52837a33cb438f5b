"""The dump and its files: one process's tree assembled, written atomically as strict JSON, read back."""
