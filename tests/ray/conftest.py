"""The local Ray the tests here share (in local mode, 2 CPUs): starting it costs seconds."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray for every test here: starting it costs seconds."""
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]'")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()
