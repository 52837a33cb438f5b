"""What the plain Ray program imports, as a user's own package would be: a ``@timed`` function
(Ray pickles functions of the program's ``__main__`` by value, and ``@timed`` ones must be imported
by the workers) and the program's own worker set-up hook."""

import os

from profiler import timed

SETUP_MARK = "RAY_PROGRAM_SETUP_HOOK_RAN"


@timed
def score(rewards):
    """The return of an episode piece: a function the program times itself."""
    return sum(rewards)


def user_setup():
    """The program's own worker_process_setup_hook: rlprof's runs first, then this one."""
    os.environ[SETUP_MARK] = "yes"
