"""``rlprof demo``: a real, profiled REINFORCE run on CartPole over four env worker processes.

``register`` is the entry point that adds ``demo`` to the ``rlprof`` command.
"""

from envmanager.demo.training_run import register

__all__ = ["register"]
