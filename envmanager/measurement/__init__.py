"""What the manager measures of each step: critical path, env time, unreported steps, resources."""
