"""The seeds' control surfaces on rlprof's one timer core: MXNet's ``mxnet.profiler`` (settings,
state, dumps, domains, tasks, counters, markers, scopes) and MegEngine's ``Profiler`` session."""
