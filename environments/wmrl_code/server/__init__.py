"""The Space's server: the app of ``wmrl serve``."""
