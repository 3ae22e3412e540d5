"""The errors a user sees as one line and exit status 2 (a leaf: every layer may raise them)."""

from __future__ import annotations

__all__ = ["ConfigError", "StartupError"]


class ConfigError(ValueError):
    """A bad configuration value; the message is the one line the user sees."""


class StartupError(ConfigError):
    """The environment cannot serve a valid configuration (a port in use, an unreadable file, no cluster API,
    a KUBECONFIG that does not load); the message is the one line the user sees, and the exit status is 2."""
