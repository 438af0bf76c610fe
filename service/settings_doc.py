"""The README's settings table, made from the settings' own docstrings."""

from __future__ import annotations

from service.settings import Settings, env_name


def _default(name: str) -> str:
    field = Settings.model_fields[name]
    if name == "worker_name":
        return "host name and pid"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, list):
        return f"`{','.join(map(str, value))}`" if value else "(empty)"
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
