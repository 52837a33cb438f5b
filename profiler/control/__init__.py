"""MXNet's ``mxnet.profiler`` surface: settings, state, dumps, domains, tasks, counters, markers, scopes."""
