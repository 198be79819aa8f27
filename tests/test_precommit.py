"""The nbstripout commit hook and the stripped-chapter tests agree.

The hook's command line is read from .pre-commit-config.yaml and run as pre-commit runs it: on a committed
chapter it changes no byte, and on the same chapter as a kernel leaves it (outputs, execution counts, full
language_info, execution timings) it gives the committed bytes back.
"""

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def hook_command(hook_id):
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    (hook,) = [hook for repo in config["repos"] for hook in repo["hooks"] if hook["id"] == hook_id]
    argv = shlex.split(hook["entry"]) + hook.get("args", [])
    argv[0] = str(ROOT / argv[0])  # pre-commit runs entries from the repository root
    return argv


def as_executed(notebook):
    """``notebook`` (parsed JSON) with what running it in Jupyter adds: outputs, counts, kernel details."""
    executed = json.loads(json.dumps(notebook))
    executed["metadata"]["language_info"].update(
        codemirror_mode={"name": "ipython", "version": 3},
        file_extension=".py",
        mimetype="text/x-python",
        nbconvert_exporter="python",
        pygments_lexer="ipython3",
        version="3.11.2",
    )
    count = 0
    for cell in executed["cells"]:
        if cell["cell_type"] == "code":
            count += 1
            cell["execution_count"] = count
            cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": [f"output {count}\n"]}]
            cell["metadata"]["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00.000000Z"}
    return executed


def write_like_jupyter(notebook, path):
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    """Run the hook once on a copy of every chapter and on an executed copy of every chapter."""
    root = tmp_path_factory.mktemp("notebooks")
    copies, executed = [], []
    for path in NOTEBOOKS:
        copies.append(shutil.copy(path, root / path.name))
        executed.append(root / f"executed_{path.name}")
        write_like_jupyter(as_executed(json.loads(path.read_text())), executed[-1])
    assert any(cell.get("outputs") for cell in json.loads(executed[0].read_text())["cells"])
    subprocess.run([*hook_command("nbstripout"), *map(str, copies + executed)], check=True, cwd=ROOT)
    return {
        path.name: (Path(copy).read_bytes(), run.read_bytes()) for path, copy, run in zip(NOTEBOOKS, copies, executed)
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_hook_leaves_a_committed_chapter_byte_identical(stripped, path):
    assert stripped[path.name][0] == path.read_bytes()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_hook_strips_an_executed_chapter_back_to_the_committed_bytes(stripped, path):
    assert stripped[path.name][1] == path.read_bytes()
