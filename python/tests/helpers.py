"""Shared by the pytest suites: test data and the independent NumPy references."""
import numpy as np


def make_anchors(c=5, a=60, l=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((c, a, l)).astype(dtype)


def numpy_odc(A, r=0, Z=None):
    Z = A[r] if Z is None else Z
    G = []
    for Ai in A:
        U, _, Vt = np.linalg.svd(Ai.T @ Z)
        G.append(U @ Vt)
    return np.stack(G)


def numpy_imakura(A):
    c, a, l = A.shape
    W = np.concatenate(list(A), axis=1)  # [A_1 ... A_c], a x c*l
    U, _, _ = np.linalg.svd(W, full_matrices=False)
    Z = U[:, :l]
    return np.stack([np.linalg.lstsq(Ai, Z, rcond=None)[0] for Ai in A])


def fortran_stack(A):
    """Each A[i] Fortran-ordered, slices back to back: dcalign's own layout."""
    return np.ascontiguousarray(A.transpose(0, 2, 1)).transpose(0, 2, 1)
