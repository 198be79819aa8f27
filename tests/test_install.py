"""What a stranger meets installing posenc: the torch extra, named when it is missing."""

import json
import subprocess
import sys
import textwrap


def run_without_torch(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter in which ``import torch`` fails as if torch were not installed."""
    blocked = 'import sys\nsys.modules["torch"] = None  # makes `import torch` raise ModuleNotFoundError\n'
    return subprocess.run(
        [sys.executable, "-c", blocked + textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def test_import_posenc_nn_without_torch_names_the_extra():
    result = run_without_torch(
        """
        import json
        try:
            import posenc.nn
        except ImportError as error:
            cause = error.__cause__
            print(json.dumps([type(error).__name__, str(error), type(cause).__name__, getattr(cause, "name", None)]))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout, "import posenc.nn succeeded with torch blocked"
    kind, message, cause, missing = json.loads(result.stdout)
    assert 'pip install "posenc[torch]"' in message and 'pip install ".[torch]"' in message, message
    assert (cause, missing) == ("ModuleNotFoundError", "torch"), "the error must be chained from `import torch`"
    assert kind == "ImportError"


def test_import_posenc_and_its_checks_need_no_torch():
    result = run_without_torch("import posenc, posenc.testing; print(posenc.sinusoidal(2, 4).shape)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(2, 4)"
