"""The README's *Use it in your agent* example runs as written, against ``toollatch mock``."""

from __future__ import annotations

import re
import subprocess
import sys

from toollatch.web.live.mock import MockProvider, create_mock_app

from .conftest import ROOT
from .test_live_server import free_port, serve


def _example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it in your agent", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.+?)\n```", section, flags=re.S)
    return code


def test_the_agent_example_runs_and_runs_only_committed_calls() -> None:
    code = _example()
    assert "http://127.0.0.1:8766/v1" in code and "dashboard=" in code
    app = create_mock_app(MockProvider(None, 0.0, None), ["127.0.0.1", "localhost"])
    with serve(app) as base:
        down = f"http://127.0.0.1:{free_port()}"  # no dashboard runs there: the example must not mind
        script = code.replace("http://127.0.0.1:8766", base).replace("http://127.0.0.1:8765", down) + "\nassert [m['role'] for m in messages] == ['user', 'assistant', 'tool', 'tool']\n"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "I'll check the weather" in done.stdout
    assert 'run get_weather {"city": "Tromsø", "unit": "celsius"}' in done.stdout and "run run_sql" in done.stdout
    assert "not run" not in done.stdout
