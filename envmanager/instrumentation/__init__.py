"""``rlprof run`` with no flags: every environment the program builds, timed where it runs.

:mod:`.environments` installs it (``instrument_environments``, reached through the
``rlprof.environments`` entry point); :mod:`.factories` and :mod:`.timed_env` time each env where
it runs, :mod:`.channel` brings the workers' timers home, :mod:`.vector_env_record` turns them into
the dump's ``workers`` section and critical path, :mod:`.known_classes` times the vector step of
the classes it knows.
"""

from envmanager.instrumentation.environments import (
    FINAL_TIMERS_WAIT_SECONDS,
    EnvironmentInstrumentation,
    instrument_environments,
)

__all__ = ["FINAL_TIMERS_WAIT_SECONDS", "EnvironmentInstrumentation", "instrument_environments"]
