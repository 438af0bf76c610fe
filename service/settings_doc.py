"""The README's settings table, made from the settings' own docstrings."""

from __future__ import annotations

from service.settings import Settings, env_name


def _default(name: str) -> str:
    field = Settings.model_fields[name]
    if field.default_factory is not None:
        return "host name and pid" if name == "worker_name" else "(empty)"
    value = field.default
    if value is None:
        return "(unset)"
    if hasattr(value, "total_seconds"):
        return f"{value.total_seconds():g} s"
    return f"`{value}`"


def settings_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        doc = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `{env_name(name)}` | {_default(name)} | {doc} |")
    return "\n".join(rows)
