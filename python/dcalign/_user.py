"""The user side: anchors, secret bases, releases (re-exported by dcalign)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from ._arrays import _float_dtype, _to_numpy
from ._align import ArrayLike


def make_anchor(rows: int, features: int, kind: str = "uniform", seed: int = 0,
                dtype: Any = np.float64) -> np.ndarray:
    """Generate the shared anchor A (rows, features), the same for every user with the same seed.

    The anchor is a matrix of random rows that every user builds from the same seed, so it
    never has to be sent (a seeded anchor costs no communication: ``gamma = 0`` in
    ``communication``). Each user releases it in its own secret basis with
    ``release(A, F)``.

    Parameters
    ----------
    rows : int
        a, the number of anchor rows (at least 1).
    features : int
        m, the number of features, those of the users' data (at least 1).
    kind : {"uniform", "normal"}, default "uniform"
        The entries' distribution: independent Unif[0, 1) or standard normal.
    seed : int, default 0
        The seed, 0 to 2**64 - 1; the same seed gives the same anchor on every machine.
    dtype : float64 or float32, default numpy.float64
        The dtype of the anchor (anything ``np.dtype`` takes).

    Returns
    -------
    numpy.ndarray of shape (rows, features)
        The anchor, Fortran-ordered, in ``dtype``, in host memory.

    Raises
    ------
    ValueError
        ``rows`` or ``features`` below 1, an unknown ``kind``, or a ``dtype`` other than
        float32 and float64.
    TypeError
        A ``seed`` that is negative or not below 2**64, or a ``kind`` that is not a str.

    Examples
    --------
    >>> import numpy as np
    >>> import dcalign
    >>> A = dcalign.make_anchor(100, 5, seed=3)
    >>> A.shape, A.dtype, A.flags.f_contiguous
    ((100, 5), dtype('float64'), True)
    >>> bool(A.min() >= 0 and A.max() < 1)
    True
    >>> np.array_equal(A, dcalign.make_anchor(100, 5, seed=3))    # every user gets this A
    True
    >>> dcalign.make_anchor(100, 5, kind="normal", seed=3, dtype=np.float32).dtype
    dtype('float32')
    """
    dt = np.dtype(dtype)
    if dt == np.float64:
        return _core._make_anchor_f64(int(rows), int(features), kind, int(seed))
    if dt == np.float32:
        return _core._make_anchor_f32(int(rows), int(features), kind, int(seed))
    raise ValueError(f"dtype must be float32 or float64, got {dt}")


def secret_basis(X: ArrayLike, l: int, mixing: str = "haar", seed: int = 0, center: bool = False,
                 subspace: Optional[ArrayLike] = None) -> Any:
    """Draw a user's secret basis F = V E (m, l) from its private data.

    V (m x l) is the top-l right singular vectors of the private data X (n, m), centred with
    ``center=True`` (its principal axes), or the given subspace basis V (m, l) (e.g. user 1's,
    for the SameSpan conditions). E (l x l) is drawn by ``mixing`` from ``seed``: "haar" gives
    a Haar-distributed orthogonal E, so F has orthonormal columns; "uniform" gives independent
    Unif[0, 1) entries, so F spans the same subspace but is not orthonormal. F stays with the
    user; only ``release(X, F)`` and ``release(A, F)`` leave.

    Parameters
    ----------
    X : array of shape (n, m)
        The user's private data, one sample per row: a NumPy array, anything ``np.asarray``
        takes, or any array with ``__dlpack__`` (host memory is read without a copy; an array
        in CUDA device memory is copied to the host once and F is returned on that GPU).
        float32 is computed in float32, every other dtype in float64.
    l : int
        The dimension of the basis, 1 <= l <= min(n, m). Ignored when ``subspace`` is given
        (its columns give l).
    mixing : {"haar", "uniform"}, default "haar"
        How E is drawn.
    seed : int, default 0
        The seed of E, 0 to 2**64 - 1.
    center : bool, default False
        Subtract the column means of X before the singular value decomposition. Ignored when
        ``subspace`` is given.
    subspace : array of shape (m, l), optional
        A subspace basis V to use instead of X's; X then only gives m. Any array kind, as X;
        converted to X's precision.

    Returns
    -------
    F : array of shape (m, l)
        In X's precision and kind of array.

    Raises
    ------
    ValueError
        X or ``subspace`` not 2-D; ``l`` outside 1 to min(n, m); a NaN or an infinity in X
        (when V comes from X); an unknown ``mixing``; a ``subspace`` whose row count is not
        m, or with no columns or more columns than rows.
    TypeError
        X that cannot be converted to numbers; a ``seed`` that is negative or not below
        2**64.
    dcalign.NumericalError
        The singular value decomposition does not converge.

    Examples
    --------
    >>> import numpy as np
    >>> import dcalign
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((50, 6))          # 50 private samples of 6 features
    >>> F = dcalign.secret_basis(X, 3, seed=1)
    >>> F.shape, np.allclose(F.T @ F, np.eye(3))   # Haar mixing: orthonormal columns
    ((6, 3), True)
    >>> V = dcalign.top_right_singular_vectors(X, 3)
    >>> np.allclose(F @ F.T, V @ V.T)              # V's span, mixed by E
    True
    >>> F_u = dcalign.secret_basis(X, 3, mixing="uniform", seed=1)
    >>> np.allclose(F_u.T @ F_u, np.eye(3))        # uniform E: not orthonormal
    False
    >>> F_2 = dcalign.secret_basis(rng.standard_normal((40, 6)), 3, seed=2, subspace=V)
    >>> np.allclose(F_2 @ F_2.T, V @ V.T)          # another user in the same span
    True
    """
    x, kind = _to_numpy(X, "X")
    sub = None if subspace is None else _to_numpy(subspace, "subspace")[0]
    fn = _core._secret_basis_f32 if _float_dtype(x) == "f32" else _core._secret_basis_f64
    return kind(fn(x, int(l), mixing, int(seed), bool(center), sub))


def release(X: ArrayLike, F: ArrayLike) -> Any:
    """Return the released representation X F of data X in the secret basis F.

    This is what a user sends: its data in its basis (X~_i = X_i F_i) and the shared anchor in
    the same basis (A_i = A F_i). The product runs on the host BLAS.

    Parameters
    ----------
    X : array of shape (n, m)
        The data (one sample per row) or the shared anchor: a NumPy array, anything
        ``np.asarray`` takes, or any array with ``__dlpack__`` (host memory without a copy;
        CUDA device memory copied to the host once, the result returned on that GPU).
        float32 is computed in float32, every other dtype in float64.
    F : array of shape (m, l)
        The secret basis, e.g. from ``secret_basis``; any array kind, converted to X's
        precision.

    Returns
    -------
    array of shape (n, l)
        X F, in X's precision and kind of array.

    Raises
    ------
    ValueError
        X or F not 2-D, or F's row count is not X's column count m.
    TypeError
        X or F cannot be converted to numbers.

    Examples
    --------
    >>> import numpy as np
    >>> import dcalign
    >>> X = np.random.default_rng(0).standard_normal((50, 6))
    >>> F = dcalign.secret_basis(X, 3, seed=1)
    >>> X_released = dcalign.release(X, F)
    >>> X_released.shape, np.allclose(X_released, X @ F)
    ((50, 3), True)
    >>> dcalign.release(dcalign.make_anchor(20, 6, seed=7), F).shape   # the anchor A F
    (20, 3)
    """
    x, kind = _to_numpy(X, "X")
    f, _ = _to_numpy(F, "F")
    fn = _core._release_f32 if _float_dtype(x) == "f32" else _core._release_f64
    return kind(fn(x, f))


def transform(X_released: ArrayLike, G: ArrayLike) -> Any:
    """Map a user's released data into the collaboration space: return X~ G.

    With ``G = G[i]`` from ``align`` (or G_new from ``Aligner.enroll``), the released data of
    every user land in one common space, where the analyst trains one model on all of them.

    Parameters
    ----------
    X_released : array of shape (n, l)
        The user's released data X~ = X F (e.g. from ``release``): a NumPy array, anything
        ``np.asarray`` takes, or any array with ``__dlpack__`` (host memory without a copy;
        CUDA device memory copied to the host once, the result returned on that GPU).
        float32 is computed in float32, every other dtype in float64.
    G : array of shape (l, l)
        The user's change of basis (any (l, d) matrix with d >= 1 works); any array kind,
        converted to the precision of ``X_released``.

    Returns
    -------
    array of shape (n, l)
        X~ G (n x d for an l x d G), in the precision and kind of ``X_released``.

    Raises
    ------
    ValueError
        An array that is not 2-D, or a G whose row count is not the column count l of
        ``X_released`` (or that has no columns).
    TypeError
        An array that cannot be converted to numbers.

    Examples
    --------
    Three users whose bases share one span; after alignment their anchors agree:

    >>> import numpy as np
    >>> import dcalign
    >>> rng = np.random.default_rng(0)
    >>> data = [rng.standard_normal((30, 6)) for _ in range(3)]
    >>> V = dcalign.top_right_singular_vectors(data[0], 2)
    >>> bases = [dcalign.secret_basis(X, 2, seed=10 + i, subspace=V)
    ...          for i, X in enumerate(data)]
    >>> anchor = dcalign.make_anchor(40, 6, seed=1)
    >>> anchors = np.stack([dcalign.release(anchor, F) for F in bases])
    >>> G, _ = dcalign.align(anchors, target_rotation="identity")
    >>> aligned = [dcalign.transform(A_i, G_i) for A_i, G_i in zip(anchors, G)]
    >>> np.allclose(aligned[1], aligned[0]) and np.allclose(aligned[2], aligned[0])
    True
    >>> dcalign.transform(dcalign.release(data[1], bases[1]), G[1]).shape
    (30, 2)
    """
    x, kind = _to_numpy(X_released, "X")
    g, _ = _to_numpy(G, "G")
    fn = _core._transform_f32 if _float_dtype(x) == "f32" else _core._transform_f64
    return kind(fn(x, g))


def top_right_singular_vectors(X: ArrayLike, l: int, center: bool = False) -> Any:
    """Return the top-l right singular vectors (m, l) of X (n, m), with fixed signs.

    The columns are orthonormal, in the order of decreasing singular values. The sign of each
    column is fixed so that its entry of largest magnitude is positive, which makes the result
    deterministic. With ``center=True`` they are those of X minus its column means (the
    principal axes of PCA). ``secret_basis`` takes its V from here.

    Parameters
    ----------
    X : array of shape (n, m)
        The data, one sample per row: a NumPy array, anything ``np.asarray`` takes, or any
        array with ``__dlpack__`` (host memory without a copy; CUDA device memory copied to
        the host once, the result returned on that GPU). float32 is computed in float32,
        every other dtype in float64.
    l : int
        How many vectors, 1 <= l <= min(n, m).
    center : bool, default False
        Subtract the column means first.

    Returns
    -------
    array of shape (m, l)
        In X's precision and kind of array.

    Raises
    ------
    ValueError
        X not 2-D, ``l`` outside 1 to min(n, m), or a NaN or an infinity in X.
    TypeError
        X cannot be converted to numbers.
    dcalign.NumericalError
        The singular value decomposition (LAPACK gesvd) does not converge.

    Examples
    --------
    >>> import numpy as np
    >>> import dcalign
    >>> X = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-2.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    >>> V = dcalign.top_right_singular_vectors(X, 2)
    >>> V.shape, np.allclose(V, [[1, 0], [0, 1], [0, 0]])
    ((3, 2), True)
    >>> np.array_equal(dcalign.top_right_singular_vectors(-X, 2), V)   # signs are fixed
    True
    """
    x, kind = _to_numpy(X, "X")
    fn = _core._top_right_f32 if _float_dtype(x) == "f32" else _core._top_right_f64
    return kind(fn(x, int(l), bool(center)))
