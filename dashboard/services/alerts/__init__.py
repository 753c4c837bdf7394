"""Alerts on the dashboard side: what the Alerts page, the sidebar and `pitwall alerts` read and
write (views.py) and the Alerts page's rule edits (rule_edits.py). The runner's Alerting is
assembled by cli/wiring.py."""
