"""The README's Python example runs as written, and its commands are the ones CI runs."""

import os
import re


def _blocks(root, lang):
    text = open(os.path.join(root, "README.md")).read()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_python_example_runs(root):
    blocks = _blocks(root, "python")
    assert blocks
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_ci_runs_readme_commands(root):
    ci = open(os.path.join(root, ".ci", "run")).read()
    for cmd in ('pip install -e ".[test]"', "python -m pytest -q"):
        assert cmd in ci
        assert cmd in open(os.path.join(root, "README.md")).read()
