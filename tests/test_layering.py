"""Layering: importing the assembler (every module of it, the CLI included) loads no web framework."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import assembler

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("fastapi", "starlette", "jinja2", "uvicorn", "websockets", "web")

SCRIPT = """
import importlib, json, pkgutil, sys
import assembler
names = ["assembler"] + [m.name for m in pkgutil.walk_packages(assembler.__path__, "assembler.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
"""


def test_submodules_are_discovered() -> None:
    names = {m.name for m in pkgutil.walk_packages(assembler.__path__, "assembler.")}
    assert {"assembler.cli", "assembler.assembler", "assembler.dialects.openai_chat", "assembler.dialects.anthropic"} <= names


def test_importing_the_assembler_loads_no_web_framework() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "assembler.cli" in report["imported"] and "assembler.pipeline" in report["imported"]
    loaded = set(report["modules"])
    leaked = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN)
    assert leaked == []


def test_the_check_would_notice_a_web_import() -> None:
    # guard against a vacuous pass: the same subprocess sees starlette when it is imported
    script = SCRIPT.replace("import assembler\n", "import assembler, starlette\n", 1)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "starlette" in json.loads(done.stdout)["modules"]
