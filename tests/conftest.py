"""Shared test configuration.

TRITON_INTERPRET must be set before any module decorated with ``@triton.jit`` is imported (it
is read at decoration time), so it is set here, before test collection imports anything. The
machines that run the suite have no GPU; the interpreter runs the kernels on the CPU.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

# These machines are shared and noisy: no per-example deadline, and a modest example count.
settings.register_profile(
    "attnbook",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("attnbook")
