"""The conformance suite: the original's test scenarios, ported by intent.

Each module `test_<stem>.py` follows one test file of the original (named in its
docstring and in `originals.txt`); each test carries `@pytest.mark.follows("name")`
with the name of the original's test method whose scenario it follows.
`coverage.py` counts them against the manifest.
"""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "follows(name): the original's test method whose scenario this test follows",
    )
