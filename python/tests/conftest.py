import os
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the pipecheck_jax package, uninstalled
sys.path.insert(0, HERE)  # kernels.py


@pytest.fixture
def workdir():
    """A temporary folder that is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="pipecheck_jax_test_") as d:
        yield d
