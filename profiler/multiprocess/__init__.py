"""Timers across processes: a worker's payloads, the trainer's merger, block ids, clock offsets."""
