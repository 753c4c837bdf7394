"""Pitwall's dashboard: Streamlit pages, components and the services only the UI uses."""
