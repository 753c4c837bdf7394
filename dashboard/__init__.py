"""Pitwall's dashboard: CLI, settings, Streamlit pages, components and Streamlit-free services."""

__version__ = "0.1.0"
