"""The GPU checks (benchmarks/gpu/checks.py) under pytest: marked `gpu`, skipped where CUDA is not available
(so the CPU suite skips them). `zerolock bench gpu` runs them with `-m gpu`; `ZEROLOCK_GPU_TESTS_DEVICE=cpu`
runs the same checks on gloo, to keep their code working without a GPU."""
import pytest

from benchmarks.gpu.checks import CHECKS, CheckRuns, CheckShape, check_device

DEVICE = check_device()
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(DEVICE is None, reason="needs CUDA (or ZEROLOCK_GPU_TESTS_DEVICE=cpu)")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return CheckRuns(root=tmp_path_factory.mktemp("gpu-check"), shape=CheckShape(device=DEVICE or "cpu"))


@pytest.mark.parametrize("check", list(CHECKS))
def test_gpu_check(runs, check, record_property):
    for key, value in CHECKS[check](runs).items():
        record_property(key, value)
