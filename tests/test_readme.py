"""The usage examples in README.md and in PACKAGE.md (the package's description) run as written."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PACKAGE = ROOT / "PACKAGE.md"


def run_first_python_block(path: Path) -> dict:
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)
    assert blocks, f"{path.name} has no python example"
    namespace = {}
    exec(compile(blocks[0], str(path), "exec"), namespace)
    return namespace


def test_readme_usage_example_runs():
    namespace = run_first_python_block(README)
    assert namespace["y"].shape == (8, 100, 512)
    assert namespace["q_rot"].shape == namespace["q"].shape
    assert namespace["alibi"].shape == namespace["t5"].shape == (8, 100, 100)


def test_package_description_example_runs():
    namespace = run_first_python_block(PACKAGE)
    assert namespace["q_rot"].shape == namespace["q"].shape
    assert namespace["q_next"].shape == (2, 8, 1, 64)


def test_the_package_metadata_uses_the_package_description():
    """The example tested above is the one installers read: pyproject.toml's ``readme`` is PACKAGE.md."""
    readme = re.findall(r'^readme = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert readme == [PACKAGE.name]
