"""Pitwall's configuration: settings (config/settings.py) and the version every layer reports."""

__version__ = "0.1.0"
