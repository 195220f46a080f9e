"""Aligner: fit on the first users, enrol users who join later (re-exported by dcalign)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Tuple, Union

import numpy as np

from . import _core
from ._arrays import _Kind, _precision, _to_numpy
from ._align import ArrayLike


class Aligner:
    """Fit an alignment on the first users and enroll users who join later.

    The Python face of the C++ ``dcalign::Aligner``. ``fit`` aligns the anchors of the first c
    users exactly as ``align`` does and keeps the method's target Z (a x l); ``enroll`` then
    aligns a user who joins later from that user's ``A_new`` alone, in O(a l^2), without
    changing anyone else's G_i. ``save`` writes the fitted model to a directory and
    ``Aligner.load`` reads it back, in this process or another (``dcalign enroll --model``
    reads the same directory).

    How a new user is aligned depends on the method: ODC, GOPP and OPP take the Procrustes
    step against the kept target (for ODC and OPP exactly the G_i the batch alignment gives
    that user); Imakura-DC solves least squares against its target U R; Kawakami-DC and RDP,
    which have no target, keep the mean Zbar of the aligned anchors and solve least squares
    against it, which leaves the fitted users' G_i valid.

    ``Aligner()`` takes no arguments and makes an unfitted model: ``fitted`` is False, and
    every other property, ``enroll`` and ``save`` raise ValueError until ``fit`` or
    ``Aligner.load`` gives it a model. The model computes on the host; arrays in CUDA memory
    are copied to the host once and the results copied back to that GPU.

    Notes
    -----
    fit() copies the anchors once into the library's Stack (the C++ Aligner takes a Stack),
    whatever their layout, so its report's ``input_copied`` is always True.

    Examples
    --------
    Fit ODC on three users, enroll a fourth, and save and load the model:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import dcalign
    >>> A = np.random.default_rng(0).standard_normal((4, 8, 2))   # 4 users, a = 8, l = 2
    >>> model = dcalign.Aligner()
    >>> model.fitted
    False
    >>> G, report = model.fit(A[:3], method="odc", target_rotation="identity")
    >>> model.fitted, model.method, model.users, model.anchor_rows, model.dim
    (True, 'odc', 3, 8, 2)
    >>> model.precision, model.target.shape
    ('float64', (8, 2))
    >>> G_new, enrol_report = model.enroll(A[3])              # (a, l) -> (l, l)
    >>> G_all, _ = dcalign.align(A, "odc", target_rotation="identity")
    >>> np.allclose(G_new, G_all[3])       # ODC: what aligning all four gives the fourth
    True
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     model.save(os.path.join(tmp, "model"))
    ...     loaded = dcalign.Aligner.load(os.path.join(tmp, "model"))
    >>> np.allclose(loaded.enroll(A[3])[0], G_new)
    True
    """

    def __init__(self) -> None:
        self._impl: Any = None
        self._kind = _Kind()

    @property
    def fitted(self) -> bool:
        """Whether the Aligner holds a model (after ``fit`` or ``Aligner.load``); never raises."""
        return self._impl is not None and self._impl.fitted

    def _require(self) -> Any:
        if self._impl is None:
            raise ValueError("Aligner: not fitted; call fit() or Aligner.load() first")
        return self._impl

    def fit(self, anchors: ArrayLike, method: str = "odc",
            **options: Any) -> Tuple[Any, Dict[str, Any]]:
        """Align the first c users and keep the target for enrolment.

        The alignment is exactly ``align(anchors, method, **options)``; the Aligner then keeps
        the method's target Z (Kawakami-DC and RDP: the mean of the aligned anchors), the
        method and its options. Fitting again replaces the model; a fit that fails leaves the
        previous model (if any) in place.

        Parameters
        ----------
        anchors : array of shape (c, a, l)
            float32 or float64, which becomes the model's precision; a NumPy array, anything
            ``np.asarray`` takes, or any array with ``__dlpack__`` (a PyTorch, CuPy or JAX
            array). Copied once into the library whatever its layout. An array in CUDA device
            memory is copied to the host once, and G is returned on that GPU.
        method : str, default "odc"
            One of the names ``dcalign.methods()`` gives.
        **options
            The options of ``align`` (``dcalign.options()`` lists them), including the arrays
            ``rotation`` and ``target``; ``device`` chooses the backend of the fit as there.

        Returns
        -------
        G : array of shape (c, l, l)
            As ``align`` returns it: the anchors' dtype and kind of array, ``A[i] @ G[i]``
            the aligned anchor of user i.
        report : dict
            The alignment report, as ``align`` returns it; ``input_copied`` is always True.

        Raises
        ------
        ValueError
            Anchors that are not 3-D, not float32 or float64, or otherwise bad (as for
            ``align``); an unknown method; an option value out of its range.
        TypeError
            An unknown option name or an option of the wrong type.
        RuntimeError
            ``device="cuda"`` where the CUDA backend is unavailable.
        dcalign.NumericalError
            A numerical failure during the alignment.

        Examples
        --------
        >>> import numpy as np
        >>> import dcalign
        >>> A = np.random.default_rng(1).standard_normal((3, 10, 4)).astype(np.float32)
        >>> model = dcalign.Aligner()
        >>> G, report = model.fit(A, "imakura")
        >>> G.shape, G.dtype, model.precision
        ((3, 4, 4), dtype('float32'), 'float32')
        >>> report["users"], report["input_copied"]
        (3, True)
        """
        x, kind = _to_numpy(anchors, "anchors")
        prec = _precision(x, "anchors")
        if x.ndim != 3:
            raise ValueError(f"anchors must be a 3-D array (c, a, l), got {x.ndim} dimensions")
        impl = _core._AlignerF64() if prec == "f64" else _core._AlignerF32()
        G, report_json = impl.fit(x, method, options)
        self._impl, self._kind = impl, kind
        report = json.loads(report_json)
        report["input_copied"] = True
        return kind(G), report

    def enroll(self, A_new: ArrayLike, threads: int = 0) -> Tuple[Any, Dict[str, Any]]:
        """Align users who join later against the fitted model.

        Each new user is aligned from its own anchor representation alone; the fitted users'
        G_i and the model do not change, so users can be enrolled one by one or k at a time
        with the same results.

        Parameters
        ----------
        A_new : array of shape (a, l) or (k, a, l)
            One new user's anchor representation, or k users' stacked; a and l must be the
            fitted ones. float32 or float64, converted to the model's precision; a NumPy
            array, anything ``np.asarray`` takes, or any array with ``__dlpack__``. An array
            in CUDA device memory is copied to the host once, and G_new is returned on that
            GPU.
        threads : int, default 0
            CPU threads over the users enrolled (0: all cores).

        Returns
        -------
        G_new : array of shape (l, l) or (k, l, l)
            In the model's precision and ``A_new``'s kind of array, ``A_new @ G_new`` (per
            user) the aligned anchor.
        report : dict
            The enrolment report (the keys of ``dcalign enroll --report``): ``method``,
            ``device``, ``precision``, ``users`` (the users enrolled by this call),
            ``anchor_rows``, ``dim``, ``fitted_users`` (c), then one list entry per enrolled
            user in ``residual`` (the squared Frobenius norm of ``A_new G_new - Z``),
            ``relative_residual``, ``orthogonality_error`` and ``rank_ratio``, and
            ``seconds``.

        Raises
        ------
        ValueError
            The Aligner is not fitted; ``A_new`` is not float32 or float64 (e.g. integers),
            not 2-D or 3-D, of another shape than the fitted (a, l), has a NaN or an
            infinity, or is numerically rank deficient (or ``A_new^T Z`` is, for the methods
            that take its polar factor).
        dcalign.NumericalError
            A numerical failure of the factorisation.

        Examples
        --------
        >>> import numpy as np
        >>> import dcalign
        >>> A = np.random.default_rng(0).standard_normal((5, 8, 2))
        >>> model = dcalign.Aligner()
        >>> _ = model.fit(A[:3], target_rotation="identity")
        >>> G_new, report = model.enroll(A[3:])                    # two users at once
        >>> G_new.shape, report["users"], report["fitted_users"], len(report["residual"])
        ((2, 2, 2), 2, 3, 2)
        >>> np.allclose(model.enroll(A[4])[0], G_new[1])           # or one by one
        True
        >>> model.enroll(A[3][:, :1])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: enroll: A_new is 8 x 1, expected a x l = 8 x 2, ...
        """
        impl = self._require()
        x, kind = _to_numpy(A_new, "A_new")
        want = np.float64 if isinstance(impl, _core._AlignerF64) else np.float32
        if x.dtype.kind != "f" or x.dtype.itemsize not in (4, 8):
            raise ValueError(f"A_new must be float32 or float64, got dtype {x.dtype}")
        x = x.astype(want, copy=False)
        G, report_json = impl.enroll(x, int(threads))
        return kind(G), json.loads(report_json)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the fitted model to a directory, atomically.

        The directory holds ``model.json`` (the format marker and version, the method, the
        precision, a, l, c, the rank tolerance and the method's options) and ``target.npy``
        (Z, a x l, in the model's precision). It is written under a temporary name beside
        ``path`` and renamed into place, so a failed save never leaves a half-written model.
        An existing ``path`` is replaced only when it is a dcalign model directory.

        Parameters
        ----------
        path : str or os.PathLike
            The model directory to write. Its parent must exist.

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        OSError
            The directory cannot be written: its parent is missing or not writable, or
            ``path`` exists and is not a dcalign model directory (never replaced).

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> import dcalign
        >>> model = dcalign.Aligner()
        >>> _ = model.fit(np.random.default_rng(0).standard_normal((3, 8, 2)))
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     model.save(os.path.join(tmp, "model"))
        ...     print(sorted(os.listdir(os.path.join(tmp, "model"))))
        ['model.json', 'target.npy']
        """
        self._require().save(os.fspath(path))

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Aligner":
        """Read a model that ``save`` (or ``dcalign align --model-out``) wrote.

        The precision recorded in ``model.json`` decides the precision of the loaded model.

        Parameters
        ----------
        path : str or os.PathLike
            The model directory.

        Returns
        -------
        Aligner
            A fitted Aligner, ready to ``enroll``.

        Raises
        ------
        OSError
            A missing, truncated or inconsistent model (a ``model.json`` that is not a
            dcalign model or is of another format version, a ``target.npy`` whose shape or
            dtype disagrees with it), with the file named.

        Examples
        --------
        >>> import os, tempfile
        >>> import dcalign
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     dcalign.Aligner.load(os.path.join(tmp, "missing"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        OSError: cannot load model '...missing': no such directory ...
        """
        p = os.fspath(path)
        prec = _core._model_precision(p)
        impl_cls = _core._AlignerF64 if prec == "float64" else _core._AlignerF32
        self = cls()
        self._impl = impl_cls.load(p)
        return self

    @property
    def method(self) -> str:
        """The method of the fitted model, one of ``dcalign.methods()``.

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        """
        return self._require().method

    @property
    def users(self) -> int:
        """c, the number of users the model was fitted on (enrolments do not change it).

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        """
        return self._require().users

    @property
    def anchor_rows(self) -> int:
        """a, the number of anchor rows every enrolled ``A_new`` must have.

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        """
        return self._require().anchor_rows

    @property
    def dim(self) -> int:
        """l, the dimension of the anchor representations (G_new is l x l).

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        """
        return self._require().dim

    @property
    def precision(self) -> str:
        """The precision of the model, ``"float64"`` or ``"float32"``.

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        """
        return "float64" if isinstance(self._require(), _core._AlignerF64) else "float32"

    @property
    def target(self) -> np.ndarray:
        """The kept target Z, a NumPy array of shape (a, l); Kawakami-DC and RDP keep Zbar.

        Raises
        ------
        ValueError
            The Aligner is not fitted.
        """
        return self._require().target
