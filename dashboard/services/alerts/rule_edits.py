"""Alert rules edited on the Alerts page by a signed-in operator: change a rule's threshold,
for_s, severity or enabled; add a rule (a `[[alerts]]` table in TOML); remove an added rule or
revert a page edit. Every change is checked by the same parser as pitwall.toml's `[[alerts]]`
(runner/alerts/rules.py) before anything is stored, stored as CollectorState `alerts:rules`
(the way SLO target edits are stored), and audited with who, what, before and after. The runner
reads the stored edits at its next evaluation pass (rules.rule_source), so no restart is needed.
"""

from __future__ import annotations

import tomllib
from typing import Any

from sqlalchemy.engine import Engine

from config.settings import Settings
from runner.alerts import rules as rr
from runner.alerts.rules import AlertRuleError, Rule
from storage import repo

#: where an effective rule comes from, as the Alerts page shows it
ORIGINS = ("default", "pitwall.toml", "page edit", "added on page")


def _defaults(settings: Settings) -> bool:
    return bool(settings.alerting.get("defaults", True))


def effective(settings: Settings, engine: Engine) -> list[tuple[Rule, str]]:
    """Every rule in force or switched off, with its origin (ORIGINS)."""
    edits = rr.load_edits(engine)
    in_file = {t.get("name") for t in settings.alerts or [] if isinstance(t, dict)}
    out = []
    for r in rr.build_rules(rr.merge_edits(settings.alerts, edits, defaults=_defaults(settings)),
                         defaults=_defaults(settings), disabled=True):
        origin = ("added on page" if r.name in edits["added"] else "page edit" if r.name in edits["changed"]
                  else "pitwall.toml" if r.name in in_file else "default")
        out.append((r, origin))
    return out


def _validate(settings: Settings, edits: dict[str, Any], name: str, where: str) -> Rule:
    """The rule `name` as it would be with `edits`, every rule checked; AlertRuleError otherwise."""
    tables = rr.merge_edits(settings.alerts, edits, defaults=_defaults(settings))
    table = next((t for t in tables if isinstance(t, dict) and t.get("name") == name), {"name": name})
    rule = rr.parse_rule(table, where)
    rr.build_rules(tables, defaults=_defaults(settings), disabled=True)  # duplicate names, the rest
    return rule


def _store(engine: Engine, edits: dict[str, Any], *, actor: str, action: str, target: str,
           detail: dict[str, Any]) -> None:
    with engine.begin() as conn:
        repo.save_state(conn, key=rr.EDITS_KEY, value=edits)
    repo.add_audit(engine, actor=actor, action=action, target=target, detail=detail)


def edit_rule(settings: Settings, engine: Engine, *, name: str, change: dict[str, Any], actor: str) -> Rule:
    """Change some EDITABLE fields of one rule (audited `alert_rule_edit`, before -> after);
    AlertRuleError with the parser's message, and nothing stored, when the result is not valid."""
    current = {r.name: r for r, _ in effective(settings, engine)}
    if name not in current:
        raise AlertRuleError(f"There is no alert rule {name!r}; pick one from the rules list.")
    bad = sorted(set(change) - set(rr.EDITABLE))
    if bad:
        raise AlertRuleError(f"{bad[0]} cannot be changed here; the page edits {', '.join(rr.EDITABLE)} "
                             "(change the rest in pitwall.toml).")
    if "value" in change and current[name].kind != "threshold":
        raise AlertRuleError(f"{name} is a {current[name].kind} rule; only threshold rules have a value.")
    before = {k: getattr(current[name], k) for k in change}
    change = {k: v for k, v in change.items() if before[k] != v}
    if not change:
        return current[name]
    edits = rr.load_edits(engine)
    if name in edits["added"]:
        edits["added"][name] = {**edits["added"][name], **change}
    else:
        edits["changed"][name] = {**edits["changed"].get(name, {}), **change}
    rule = _validate(settings, edits, name, f"edit of {name}")
    _store(engine, edits, actor=actor, action="alert_rule_edit", target=name,
           detail={"before": {k: before[k] for k in change}, "after": change})
    return rule


def _table(text: str) -> dict[str, Any]:
    """A rule typed as TOML: `key = value` lines, optionally under one `[[alerts]]` header."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AlertRuleError(f"The new rule is not valid TOML ({exc}); write key = value lines as in "
                             "pitwall.toml's [[alerts]].") from exc
    if set(doc) == {"alerts"}:
        if not isinstance(doc["alerts"], list) or len(doc["alerts"]) != 1:
            raise AlertRuleError("Add one rule at a time: a single [[alerts]] table.")
        doc = doc["alerts"][0]
    return doc


def add_rule(settings: Settings, engine: Engine, *, text: str, actor: str) -> Rule:
    """Add a rule from its TOML table (audited `alert_rule_add`); AlertRuleError with the
    parser's message, and nothing stored, when it is not valid or its name is taken."""
    table = _table(text)
    rule = rr.parse_rule(table, "new rule")
    if rule.name in {r.name for r, _ in effective(settings, engine)}:
        raise AlertRuleError(f"A rule named {rule.name!r} exists already; edit it, or give the new rule "
                             "its own name.")
    edits = rr.load_edits(engine)
    edits["added"][rule.name] = table
    _validate(settings, edits, rule.name, "new rule")
    _store(engine, edits, actor=actor, action="alert_rule_add", target=rule.name,
           detail={"before": None, "after": table})
    return rule


def remove_edit(settings: Settings, engine: Engine, *, name: str, actor: str) -> str:
    """Delete a rule added on the page (`alert_rule_delete`) or revert a rule to pitwall.toml /
    its default (`alert_rule_revert`); returns what was done. Rules of the file are switched off,
    not deleted: AlertRuleError says so."""
    edits = rr.load_edits(engine)
    if name in edits["added"]:
        before = edits["added"].pop(name)
        action, done = "alert_rule_delete", "deleted"
    elif name in edits["changed"]:
        before = edits["changed"].pop(name)
        action, done = "alert_rule_revert", "reverted to pitwall.toml"
    else:
        raise AlertRuleError(f"{name} comes from pitwall.toml or the defaults and has no page edit; "
                             "switch it off (enabled) instead of deleting it.")
    _store(engine, edits, actor=actor, action=action, target=name, detail={"before": before, "after": None})
    return done

