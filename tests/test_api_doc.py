"""docs/api.md: every python block runs, in order, as one session in a scratch folder."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_api_reference_examples_run(tmp_path, monkeypatch):
    with open(os.path.join(ROOT, "docs", "api.md")) as f:
        text = f.read()
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count("```python") >= 7  # none missed, one per section at least
    monkeypatch.chdir(tmp_path)  # the examples write runs/ here, not into the repository
    session: dict = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/api.md, python block {i + 1}", "exec"), session)
