"""Layering: importing the library (every module of ``toollatch`` but the dashboard, ``toollatch.web``,
the CLI included) loads neither a web framework nor the dashboard."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import toollatch

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("fastapi", "starlette", "jinja2", "uvicorn", "websockets")
DASHBOARD = "toollatch.web"

SCRIPT = """
import importlib, json, pkgutil, sys
import toollatch
names = ["toollatch"]


def walk(package):
    # every module of the package but the dashboard (toollatch.web), imported as it is found
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name != "toollatch.web":
            names.append(info.name)
            module = importlib.import_module(info.name)
            if info.ispkg:
                walk(module)


walk(toollatch)
print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
"""


def library_modules() -> tuple[list[str], set[str]]:
    """The modules the layering script imported, and every module loaded once it had."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return report["imported"], set(report["modules"])


def test_submodules_are_discovered() -> None:
    names = set(library_modules()[0])
    assert {"toollatch.cli", "toollatch.core.assembler", "toollatch.dialects.openai_chat", "toollatch.dialects.anthropic"} <= names
    assert not any(name == DASHBOARD or name.startswith(DASHBOARD + ".") for name in names)


def test_importing_the_library_loads_no_web_framework_nor_the_dashboard() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "toollatch.cli" in report["imported"] and "toollatch.core.pipeline" in report["imported"]
    loaded = set(report["modules"])
    leaked = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN or m == DASHBOARD or m.startswith(DASHBOARD + "."))
    assert leaked == []


def test_the_check_would_notice_a_web_import() -> None:
    # guard against a vacuous pass: the same subprocess sees starlette when it is imported
    script = SCRIPT.replace("import toollatch\n", "import toollatch, starlette, toollatch.web.settings\n", 1)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert {"starlette", "toollatch.web.settings"} <= set(json.loads(done.stdout)["modules"])
