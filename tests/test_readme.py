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
    """CI's install and test commands, each as the README gives it; its tests are all of them, slow included,
    on every core."""
    ci = [line.strip() for line in open(os.path.join(root, ".ci", "run"))
          if line.startswith(("pip install", "python -m pytest"))]
    readme = open(os.path.join(root, "README.md")).read()
    assert 'pip install -e ".[test]"' in ci
    tests = [line for line in ci if line.startswith("python -m pytest")]
    assert tests == ['python -m pytest -q -n auto -m "slow or not slow"']
    for cmd in ci:
        assert cmd in readme
