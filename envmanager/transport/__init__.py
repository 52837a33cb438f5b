"""The subprocess transport: worker processes, their loop, the pipe protocol, shared step buffers."""
