"""Alerts on the dashboard side: the runner's Alerting built from settings (wiring.py) and what the
Alerts page, the sidebar and `pitwall alerts` read and write (views.py)."""
