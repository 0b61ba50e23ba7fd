import numpy as np
import pytest

from pipeline.core.arrays import sorted_unique


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int64])
def test_sorted_unique_is_np_unique(dtype):
    rng = np.random.default_rng(7)
    for values in (rng.integers(0, 50, 1000), rng.integers(0, 10**9, 1000), [], [3], [5, 5, 5]):
        values = np.asarray(values, dtype=dtype)
        result = sorted_unique(values)
        assert result.dtype == values.dtype
        np.testing.assert_array_equal(result, np.unique(values))
