"""oracles._dense_ipm (private): the dense interior-point central point and its BLAS thread control."""
from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

from oracles._dense_ipm import central_point, min_norm_ipm, single_thread_blas


def test_dense_ipm_central_point():
    """A strictly interior point of a box; on a flat body the slack vanishes on exactly the implicit
    equalities and z concentrates there (a certificate Aᵀz ≈ 0)."""
    A = np.vstack([np.eye(3), -np.eye(3)])
    b = np.array([1.0, 2.0, 3.0, 1.0, 0.0, 1.0])  # -1 <= x0 <= 1, 0 <= x1 <= 2, -1 <= x2 <= 3
    cp = central_point(A, b)
    assert cp.status == "converged"
    assert np.min(b - A @ cp.x) > 0.05  # well inside (not necessarily the analytic centre)
    flat = np.vstack([A, [[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0]]])
    fb = np.concatenate([b, [1.0, -1.0]])  # x0 + x1 = 1 hidden as two rows
    cp = central_point(flat, fb)
    assert np.max(cp.s[6:]) < 1e-7 < 0.1 < np.min(cp.s[:6])
    assert np.linalg.norm(flat.T @ cp.z) <= 1e-6 * np.linalg.norm(cp.z)
    assert np.max(cp.z[:6]) < 1e-3 * np.max(cp.z[6:])


def test_min_norm_ipm_matches_the_projection_onto_a_halfspace():
    a, b = np.array([[1.0, 2.0, 2.0]]), np.array([-3.0])   # {a x <= -3}: min-norm point -3 a / |a|^2
    res = min_norm_ipm(a, b)
    assert res.status == "converged"
    np.testing.assert_allclose(res.x, -3.0 * a[0] / 9.0, atol=1e-6)


def test_single_thread_blas_limits_and_restores_through_threadpoolctl():
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with single_thread_blas():
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
        with single_thread_blas():  # a block inside another: still one thread, and the outer one restores
            assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
