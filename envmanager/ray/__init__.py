"""The Ray transport of :class:`~envmanager.RayEnvManager`: its actor pool and the actor that runs envs."""
