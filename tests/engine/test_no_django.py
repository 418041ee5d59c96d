"""The engine must stay importable (and fast to import) without Django."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "memory" / "engine"
ALLOWED_THIRD_PARTY = {"numpy", "scipy", "usearch", "Stemmer"}


def test_engine_imports_only_allowed_modules() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    bad: list[str] = []
    files = sorted(ENGINE.rglob("*.py"))
    assert files
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative import inside the engine package
                    continue
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if name.startswith("memory.engine"):  # own package, absolute form
                    continue
                if top not in stdlib and top not in ALLOWED_THIRD_PARTY:
                    bad.append(f"{path.name}:{node.lineno} imports {name}")
    assert not bad, bad


def test_import_does_not_load_django() -> None:
    code = "import sys, memory.engine; assert 'django' not in sys.modules, 'django imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ENGINE.parents[1], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
