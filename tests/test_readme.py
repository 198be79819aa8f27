"""The usage example in README.md runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_usage_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert blocks, "README.md has no python example"
    namespace = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    assert namespace["y"].shape == (8, 100, 512)
    assert namespace["q_rot"].shape == namespace["q"].shape
    assert namespace["alibi"].shape == namespace["t5"].shape == (8, 100, 100)
