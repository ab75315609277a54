"""What the plugin asks of the user's Claude Code: a supported version, and its plugin name to itself.

`OLDEST_SUPPORTED` is where the supported range starts, defined here only:
`memory-anchor doctor` warns below it, README states it and the e2e suite's
oldest pin (tests/e2e/cli/oldest/package.json) is it (tests/test_claude_code_support.py).
The range ends at the newest pin (tests/e2e/cli/newest, `make bump-claude-code`).

Standard library only: the doctor runs before the plugin's environment exists.
"""

from __future__ import annotations

import json
import os
import subprocess

OLDEST_SUPPORTED = "2.1.197"
PLUGIN_NAME = "memory-anchor"


def version_key(text: str | None) -> tuple[int, ...] | None:
    """(2, 1, 197) for "2.1.197" or "2.1.197 (Claude Code)"; None when it is no version."""
    word = (text or "").strip().split(" ", 1)[0]
    parts = word.split(".")
    if len(parts) < 2 or not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def is_supported(version: str) -> bool:
    key = version_key(version)
    return key is not None and key >= version_key(OLDEST_SUPPORTED)


def installed_version(claude: str, timeout: float = 20.0) -> str | None:
    """What `claude --version` says ("2.1.332"), or None when it does not answer with a version."""
    try:
        done = subprocess.run([claude, "--version"], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    return text.split(" ", 1)[0] if done.returncode == 0 and version_key(text) else None


def config_dir(environ: dict | None = None) -> str:
    """Claude Code's configuration folder: `$CLAUDE_CONFIG_DIR`, else ~/.claude."""
    environ = os.environ if environ is None else environ
    return environ.get("CLAUDE_CONFIG_DIR") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".claude")


def enabled_plugins_named(name: str, folder: str) -> list[str]:
    """The enabled plugins (`plugin@marketplace`, in the order the user's settings enable them) named `name`.

    Claude Code names a plugin by its manifest (`.claude-plugin/plugin.json` in the
    folder `plugins/installed_plugins.json` installs it to), whatever its marketplace
    calls it; of two enabled plugins of one name it runs the hooks of the first
    only (seen with 2.1.197 and 2.1.332, both orders).
    """
    settings = _read_json(os.path.join(folder, "settings.json"))
    enabled = settings.get("enabledPlugins") if isinstance(settings.get("enabledPlugins"), dict) else {}
    installed = _read_json(os.path.join(folder, "plugins", "installed_plugins.json")).get("plugins")
    installed = installed if isinstance(installed, dict) else {}
    named = []
    for key, on in enabled.items():
        if on is not True or not isinstance(key, str):
            continue
        manifests = [_read_json(os.path.join(entry["installPath"], ".claude-plugin", "plugin.json")).get("name")
                     for entry in installed.get(key) or [] if isinstance(entry, dict) and isinstance(entry.get("installPath"), str)]  # fmt: skip
        names = {n for n in manifests if isinstance(n, str)} or {key.split("@", 1)[0]}
        if name in names:
            named.append(key)
    return named


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
