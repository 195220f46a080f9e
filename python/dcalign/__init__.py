"""dcalign: Data Collaboration analysis from Python.

Analyst side
    ``align(anchors, method="odc", **options) -> (G, report)``
    Aligner: fit on the first users, enroll users who join later, save / load.

User side
    make_anchor, secret_basis, release (and transform, top_right_singular_vectors).

Experiments (a module built with the learning layer)
    ``run_experiment(config) -> ExperimentResult`` (records as a list of dicts,
    ``.to_pandas()``), ``check_experiment(config)``.

Evaluation
    communication (paper 001's communication model, as `dcalign comm`), paired_t_test,
    one_way_anova, two_way_anova (the statistics of the experiments' statistics section);
    analytic_gaussian, dr_privacy, reconstruction_error (the privacy measurements).

Layout. dcalign stores each matrix column-major and the anchor stack (c, a, l) back to back. A
NumPy array of shape (c, a, l) whose every slice A[i] is Fortran-ordered and whose slices are
contiguous (strides (a*l*s, s, a*s), e.g. ``as_stack(A)``, which is
``np.ascontiguousarray(A.transpose(0, 2, 1)).transpose(0, 2, 1)``) is passed to the library without a copy; any other layout or dtype
conversion costs one copy. ``report["input_copied"]`` says which happened. G comes back in the
same layout, shape (c, l, l), with A[i] @ G[i] the aligned anchor of user i.

Arrays. Every function takes NumPy arrays and any object with ``__dlpack__`` whose memory the
host can read (PyTorch CPU tensors, JAX or CuPy host arrays, NumPy >= 1.22), viewed through
``np.from_dlpack`` without a copy, and returns its results in the caller's kind: NumPy for NumPy
(and for lists, through np.asarray), else through the producing library's ``from_dlpack``
(``torch.from_dlpack``, ``jax.numpy.from_dlpack``, ...), which takes the NumPy result's DLPack
capsule without a copy where that library can. align() also takes arrays in CUDA device memory
without leaving the device (below). The user-side functions, transform and Aligner compute on
the host: an array in CUDA device memory is copied to the host once (gathered into one block on
the device first) and the result is copied to that GPU once and returned there in the caller's
kind. Arrays on other devices are refused with their device named.

GPU. ``pip install .`` builds the CUDA backend where nvcc is found, with the CUDA runtime linked
statically and cuBLAS / cuSOLVER opened on first use, so the same module imports and runs on a
machine without a GPU or a CUDA toolkit. ``align(..., device="cuda")`` then computes on the GPU
from host arrays (copied there once, G copied back); ``cuda_available()`` says whether it can.
``align(A)`` with A in GPU memory (any ``__dlpack__`` array on a CUDA device) reads A there,
gathered once on the device when it is not in dcalign's layout, and returns G on the same GPU
through the caller's ``from_dlpack``: nothing goes through the host. The producer's pending work
on A is ordered before the alignment (DLPack stream 1, the legacy default stream, on which the
backend runs), and G is complete when align returns.

Errors. Bad input (shapes, NaN, unknown option values) raises ValueError with the library's
message; unknown option names or options of the wrong type raise TypeError; file errors raise
OSError; a numerical failure raises dcalign.NumericalError (a subclass of both ArithmeticError
and ValueError); an unavailable backend (e.g. device="cuda" without CUDA) raises RuntimeError.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from . import _core
from ._core import NumericalError, blas_info, cuda_available
from ._arrays import (_align_on_device, _dc, _float_dtype, _gpu_array, _Kind, _precision,
                      _to_numpy)

__all__ = [
    "align",
    "options",
    "methods",
    "communication",
    "paired_t_test",
    "one_way_anova",
    "two_way_anova",
    "analytic_gaussian",
    "dr_privacy",
    "reconstruction_error",
    "blas_info",
    "Aligner",
    "as_stack",
    "make_anchor",
    "secret_basis",
    "release",
    "transform",
    "top_right_singular_vectors",
    "NumericalError",
    "cuda_available",
    "run_experiment",
    "check_experiment",
    "ExperimentResult",
]
__version__ = "0.3.0"

ArrayLike = Any  # a NumPy array, anything np.asarray takes, or any object with __dlpack__

def as_stack(anchors: ArrayLike) -> np.ndarray:
    """The anchors (c, a, l) in dcalign's layout (each A[i] Fortran-ordered, slices back to
    back), copying only when needed. align() takes such an array without a copy."""
    x = np.asarray(anchors)
    if x.ndim != 3:
        raise ValueError(f"anchors must be a 3-D array (c, a, l), got {x.ndim} dimensions")
    return x if _dc(x) else np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)


def align(anchors: ArrayLike, method: str = "odc", **options: Any) -> Tuple[Any, Dict[str, Any]]:
    """Change-of-basis matrices G_i for the released anchors A_i.

    Parameters
    ----------
    anchors : array of shape (c, a, l)
        float32 or float64 (the precision of the computation); a NumPy array or any array with
        ``__dlpack__`` (e.g. a ``torch.Tensor``). Each ``A[i]`` Fortran-ordered with slices
        back to back is read in place; any other layout is copied once. An array in GPU memory
        (a CUDA tensor, a CuPy array) is aligned there by the CUDA backend (a module built with
        it) and G is returned on that GPU, in the caller's kind, without leaving the device;
        ``device`` then defaults to the array's.
    method : str
        One of {methods}.
    **options
        The long options of ``dcalign align`` with underscores (``dcalign.options()`` lists
        them with their types, ranges and the methods that use them), plus the arrays
        ``rotation`` (l x l array O) and ``target`` (a x l array Z):

{options}

    Returns
    -------
    G : array of shape (c, l, l)
        In the anchors' dtype and kind of array (a torch tensor for a tensor input), with
        ``A[i] @ G[i]`` the aligned anchor of user i.
    report : dict
        The dict of ``AlignReport::to_json`` (the keys of ``dcalign align --report``) plus
        ``input_copied`` (bool).
    """
    if _gpu_array(anchors):
        return _align_on_device(anchors, method, options)
    x, kind = _to_numpy(anchors, "anchors")
    prec = _precision(x, "anchors")
    if x.ndim != 3:
        raise ValueError(f"anchors must be a 3-D array (c, a, l), got {x.ndim} dimensions")
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, got {type(method).__name__}")
    fn = _core._align_f64 if prec == "f64" else _core._align_f32
    G, report_json, _address, copied = fn(x, method, options)
    report = json.loads(report_json)
    report["input_copied"] = bool(copied)
    return kind(G), report


def options() -> list:
    """The option schema: one dict per option with its keys at every entry point (``python``,
    ``cli``, ``toml``, ``spec``, ``model``), ``type``, ``expected`` values, ``default``, ``unit``,
    ``help``, the ``methods`` that use it (empty: every method) and a further ``route``
    condition. The same table checks the options of align(), ``dcalign align``, experiment
    files, collaboration specs and saved models."""
    return json.loads(_core._option_schema_json())


def methods() -> list:
    """The names of the alignment methods, in the order of the method table."""
    return list(_core._method_names())


def _options_doc() -> str:
    lines = []
    for o in options():
        if not o["python"]:
            continue
        used = ", ".join(o["methods"]) if o["methods"] else "every method"
        lines.append(f"        - ``{o['python']}`` ({o['expected']}; default {o['default']}; {used}): "
                     f"{o['help']}")
    return "\n".join(lines)


if align.__doc__:
    align.__doc__ = align.__doc__.replace("{methods}", " | ".join(f'"{m}"' for m in methods()))
    align.__doc__ = align.__doc__.replace("{options}", _options_doc())


def _buffer_address_used(anchors: ArrayLike, method: str = "odc", **options: Any) -> int:
    """Test hook: the address of the buffer the library read the anchors from."""
    x, _ = _to_numpy(anchors, "anchors")
    fn = _core._align_f64 if _precision(x, "anchors") == "f64" else _core._align_f32
    return int(fn(x, method, options)[2])


class Aligner:
    """Fits on the anchors of the first c users and aligns users who join later (enroll) from
    their A_new alone, without changing anyone else's G_i (C++ dcalign::Aligner).

    >>> model = Aligner()
    >>> G, report = model.fit(A, method="odc", target_rotation="identity")
    >>> G_new, enrol_report = model.enroll(A_new)     # (a, l) -> (l, l); (k, a, l) -> (k, l, l)
    >>> model.save("model"); model = Aligner.load("model")

    fit() copies the anchors once into the library's Stack (the C++ Aligner takes a Stack).
    """

    def __init__(self) -> None:
        self._impl: Any = None
        self._kind = _Kind()

    @property
    def fitted(self) -> bool:
        return self._impl is not None and self._impl.fitted

    def _require(self) -> Any:
        if self._impl is None:
            raise ValueError("Aligner: not fitted; call fit() or Aligner.load() first")
        return self._impl

    def fit(self, anchors: ArrayLike, method: str = "odc", **options: Any) -> Tuple[Any, Dict[str, Any]]:
        """Aligns the first c users (exactly ``align(anchors, method, **options)``) and keeps the
        target for enrolment. Returns (G, report) like align()."""
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
        """G_new for one new user (A_new: (a, l) -> (l, l)) or k users ((k, a, l) -> (k, l, l)),
        and the enrolment report (residual, relative_residual, orthogonality_error, rank_ratio
        per user, seconds). A_new is converted to the model's precision."""
        impl = self._require()
        x, kind = _to_numpy(A_new, "A_new")
        want = np.float64 if isinstance(impl, _core._AlignerF64) else np.float32
        if x.dtype.kind != "f" or x.dtype.itemsize not in (4, 8):
            raise ValueError(f"A_new must be float32 or float64, got dtype {x.dtype}")
        x = x.astype(want, copy=False)
        G, report_json = impl.enroll(x, int(threads))
        return kind(G), json.loads(report_json)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the model directory (model.json + target.npy) atomically."""
        self._require().save(os.fspath(path))

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Aligner":
        """Reads a model written by save() (OSError for a missing, truncated or inconsistent
        model)."""
        p = os.fspath(path)
        prec = _core._model_precision(p)
        impl_cls = _core._AlignerF64 if prec == "float64" else _core._AlignerF32
        self = cls()
        self._impl = impl_cls.load(p)
        return self

    @property
    def method(self) -> str:
        return self._require().method

    @property
    def users(self) -> int:
        return self._require().users

    @property
    def anchor_rows(self) -> int:
        return self._require().anchor_rows

    @property
    def dim(self) -> int:
        return self._require().dim

    @property
    def precision(self) -> str:
        return "float64" if isinstance(self._require(), _core._AlignerF64) else "float32"

    @property
    def target(self) -> np.ndarray:
        """The kept target Z, of shape (a, l); Kawakami-DC keeps its Zbar."""
        return self._require().target


# ---------------------------------------------------------------- user side


def make_anchor(rows: int, features: int, kind: str = "uniform", seed: int = 0,
                dtype: Any = np.float64) -> np.ndarray:
    """The shared anchor A (rows, features), regenerated by every user from the same seed.
    kind: "uniform" | "normal"."""
    dt = np.dtype(dtype)
    if dt == np.float64:
        return _core._make_anchor_f64(int(rows), int(features), kind, int(seed))
    if dt == np.float32:
        return _core._make_anchor_f32(int(rows), int(features), kind, int(seed))
    raise ValueError(f"dtype must be float32 or float64, got {dt}")


def secret_basis(X: ArrayLike, l: int, mixing: str = "haar", seed: int = 0, center: bool = False,
                 subspace: Optional[ArrayLike] = None) -> Any:
    """A user's secret basis F = V E (m, l): V the top-l right singular vectors of the private
    data X (n, m) (centred with center=True), or the given subspace basis V (m, l) (e.g. user
    1's, for the SameSpan conditions); E drawn by mixing ("haar" | "uniform") from seed."""
    x, kind = _to_numpy(X, "X")
    sub = None if subspace is None else _to_numpy(subspace, "subspace")[0]
    fn = _core._secret_basis_f32 if _float_dtype(x) == "f32" else _core._secret_basis_f64
    return kind(fn(x, int(l), mixing, int(seed), bool(center), sub))


def release(X: ArrayLike, F: ArrayLike) -> Any:
    """The released representation X F of data X (n, m) with the secret basis F (m, l): a
    user's data (X~_i = X_i F_i) or the shared anchor (A_i = A F_i)."""
    x, kind = _to_numpy(X, "X")
    f, _ = _to_numpy(F, "F")
    fn = _core._release_f32 if _float_dtype(x) == "f32" else _core._release_f64
    return kind(fn(x, f))


def transform(X_released: ArrayLike, G: ArrayLike) -> Any:
    """X~ G: a user's released data (n, l) in the collaboration space, G (l, l) from align()."""
    x, kind = _to_numpy(X_released, "X")
    g, _ = _to_numpy(G, "G")
    fn = _core._transform_f32 if _float_dtype(x) == "f32" else _core._transform_f64
    return kind(fn(x, g))


def top_right_singular_vectors(X: ArrayLike, l: int, center: bool = False) -> Any:
    """Top-l right singular vectors (m, l) of X (n, m), signs fixed (largest entry positive)."""
    x, kind = _to_numpy(X, "X")
    fn = _core._top_right_f32 if _float_dtype(x) == "f32" else _core._top_right_f64
    return kind(fn(x, int(l), bool(center)))


# ---------------------------------------------------------------- evaluation


def communication(**options: Any) -> Dict[str, Any]:
    """Paper 001's communication model (eqs. 10-18): the document of ``dcalign comm --json``.

    Options (the command's, with underscores; the defaults are the paper's worked example):
    users (c), mean_samples (n), samples (the n_i; they give c unless users is given),
    anchor_rows (a), features (m), dim (l), model_parameters (N, both protocols),
    dc_model_parameters (N_DC of DC's model h, eqs. 11 and 14) and fl_model_parameters (N_FL of
    FL's model, eq. 15), each overriding N for its protocol (None: N; all three at once is a
    ValueError), bits (q), gamma (None: c, unicast; 0: a public or seeded anchor),
    participation (p), rounds (R), bandwidth (bits/s: adds the transfer times), rtt (s).
    Returns the dict with "inputs" (with "dc_model_parameters", "fl_model_parameters" and
    "model_parameters", their common value or None), "bytes", "gb", "gib",
    "break_even_rounds", "break_even_rounds_ceil", "dc_sends_less" and "transfer" (None without
    bandwidth). ValueError names a value out of range, TypeError an unknown option.
    """
    if "samples" in options and options["samples"] is not None:
        options["samples"] = [float(v) for v in np.ravel(_to_numpy(options["samples"], "samples")[0])]
    elif "samples" in options:
        del options["samples"]
    return json.loads(_core._communication(options))


def _values(x: ArrayLike, what: str) -> list:
    return [float(v) for v in np.ravel(_to_numpy(x, what)[0])]


def paired_t_test(x: ArrayLike, y: ArrayLike, alternative: str = "two-sided",
                  confidence: float = 0.95) -> Dict[str, Any]:
    """Paired t-test of x against y (x[i] pairs with y[i]), as scipy.stats.ttest_rel, with the
    paired effect size d_z and the two-sided confidence interval of the mean difference:
    dict n, mean_diff, sd_diff, t, df, p, cohens_dz, confidence, ci_lower, ci_upper,
    alternative ("two-sided" | "less" | "greater")."""
    return _core._paired_t_test(_values(x, "x"), _values(y, "y"), str(alternative),
                                float(confidence))


def one_way_anova(*groups: ArrayLike) -> Dict[str, Any]:
    """One-way ANOVA of k >= 2 groups, as scipy.stats.f_oneway, with eta^2 and Cohen's f:
    dict ss_between, ss_within, ss_total, df_between, df_within, F, p, eta_squared, cohens_f."""
    return _core._one_way_anova([_values(g, f"group {i}") for i, g in enumerate(groups)])


def two_way_anova(y: ArrayLike, a: Any, b: Any, sum_of_squares: str = "type2") -> Dict[str, Any]:
    """Two-way ANOVA with interaction, y ~ A + B + A:B (unbalanced designs too): y[i] observed at
    level a[i] of A and b[i] of B (any labels, compared as strings). sum_of_squares "type2" or
    "type3". Returns dict type, levels_a, levels_b, n, "A", "B", "A:B" (each ss, df, F, p,
    partial_eta_squared, cohens_f), ss_residual, df_residual."""
    return _core._two_way_anova(_values(y, "y"), [str(v) for v in a], [str(v) for v in b],
                                str(sum_of_squares))


def analytic_gaussian(epsilon: float, delta: float, sensitivity: float = 1.0) -> Dict[str, Any]:
    """The analytic Gaussian mechanism's noise scale (Balle and Wang, Algorithm 1) for
    (epsilon, delta)-DP at L2 sensitivity Delta, as the experiments' DP uses it: dict sigma,
    alpha, delta0, upper_branch, boundary, and classical_sigma (Dwork and Roth's calibration,
    for comparison)."""
    return _core._analytic_gaussian(float(epsilon), float(delta), float(sensitivity))


def dr_privacy(X: ArrayLike, basis: ArrayLike, epsilon: float) -> Dict[str, Any]:
    """Paper 004's epsilon-DR ratios r(x) = ||x - x F F^+|| / ||x|| of the rows of X (n, m) for
    the basis F (m, l), summarised at epsilon: dict ratios, min, median, below, fraction_below,
    kept (the rows the down-sampling defence keeps). Inputs are copied once as float64."""
    return _core._dr_privacy(_to_numpy(X, "X")[0], _to_numpy(basis, "basis")[0], float(epsilon))


def reconstruction_error(truth: ArrayLike, reconstruction: ArrayLike) -> Dict[str, Any]:
    """How far a reconstruction X^ is from X (both n x m): dict relative (||X^ - X||_F /
    ||X||_F), per_row and median_row (||x^_k - x_k|| / ||x_k||)."""
    return _core._reconstruction_error(_to_numpy(truth, "truth")[0],
                                       _to_numpy(reconstruction, "reconstruction")[0])


# ---------------------------------------------------------------- experiments


_MAX_TRIALS = 1_000_000  # as `dcalign experiment --trials`


def _experiment_module() -> Any:
    try:
        from . import _experiment
    except ImportError as e:
        raise RuntimeError(
            "this dcalign module was built without the learning layer, which runs experiments: "
            "reinstall it with pip install . --config-settings=cmake.define.DCALIGN_WITH_LEARN=ON "
            f"(needs LibTorch, LIBSVM, XGBoost and toml++) ({e})") from e
    return _experiment


def _experiment_arguments(config: Union[str, os.PathLike], data_dir: Any, trials: Any,
                          device: Any) -> Tuple[str, str, int, str]:
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"config must be the path of an experiment file (TOML), got "
                        f"{type(config).__name__}")
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int):
            raise TypeError(f"trials must be an int, got {type(trials).__name__}")
        if not 1 <= trials <= _MAX_TRIALS:
            raise ValueError(f"trials = {trials}: expected 1 to {_MAX_TRIALS}")
    if device is not None and device not in ("cpu", "cuda"):
        raise ValueError(f"device = {device!r}: expected 'cpu' or 'cuda'")
    return (os.fspath(config), "" if data_dir is None else os.fspath(data_dir),
            0 if trials is None else int(trials), "" if device is None else str(device))


class ExperimentResult:
    """What run_experiment returns: the run's JSON document (the ``<name>.json`` that
    ``dcalign experiment`` writes) as ``document``, with shortcuts.

    Attributes
    ----------
    records : list of dict
        trial, condition, method, model, metric, value, seconds (and point for a sweep), one
        per model score.
    statistics : list of dict
        The ``[[statistics]]`` section's results (empty without one).
    rounds : list of dict
        FedAvg's per-round curves (empty without FedAvg).
    config : dict
        The run's configuration, as in the document.
    name : str
        The experiment's name.
    machine : dict
        The machine it ran on.
    wall_seconds : float
        The run's wall time.
    summary : str
        The Markdown summary table the command prints.

    Notes
    -----
    ``to_pandas()`` gives the records as a pandas DataFrame (pandas must be installed).
    """

    def __init__(self, document: Dict[str, Any], summary: str) -> None:
        self.document = document
        self.summary = summary

    @property
    def records(self) -> list:
        return self.document["records"]

    @property
    def statistics(self) -> list:
        return self.document.get("statistics", [])

    @property
    def rounds(self) -> list:
        return self.document.get("rounds", [])

    @property
    def config(self) -> Dict[str, Any]:
        return self.document["config"]

    @property
    def name(self) -> str:
        return self.document["name"]

    @property
    def machine(self) -> str:
        return self.document["machine"]

    @property
    def wall_seconds(self) -> float:
        return self.document["wall_seconds"]

    def to_pandas(self) -> Any:
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("ExperimentResult.to_pandas() needs pandas (pip install pandas); "
                              "the records are in .records as a list of dicts") from e
        return pd.DataFrame.from_records(self.records)

    def __repr__(self) -> str:
        return (f"ExperimentResult(name={self.name!r}, records={len(self.records)}, "
                f"wall_seconds={self.wall_seconds:.3g})")


def run_experiment(config: Union[str, os.PathLike], *, data_dir: Optional[Union[str, os.PathLike]] = None,
                   trials: Optional[int] = None, device: Optional[str] = None,
                   out: Optional[Union[str, os.PathLike]] = None,
                   progress: Any = None) -> ExperimentResult:
    """Runs an experiment file as ``dcalign experiment`` does and returns its results.

    Parameters
    ----------
    config : str or path
        The TOML file (see ``experiments/``).
    data_dir : str or path, optional
        The dataset folder (default: the file's ``data_dir``, ``$DCALIGN_DATA``, then the
        compiled default).
    trials : int, optional
        Overrides the file's trial count (1 to 10^6).
    device : str, optional
        Overrides the file's device (``"cpu"`` or ``"cuda"``).
    out : str or path, optional
        A folder: also writes ``<name>.json``, ``.csv`` and ``.md`` there, atomically, as the
        command does (created if missing, and checked to be writable before the first trial).
    progress : None, True or callable
        None (silent), True (messages to stderr, as the command) or a callable taking each
        message.

    Returns
    -------
    ExperimentResult

    Raises
    ------
    RuntimeError
        The module was built without the learning layer.
    ValueError
        A bad file or value, with the command's message.
    OSError
        An unreadable file.
    """
    path, ddir, n, dev = _experiment_arguments(config, data_dir, trials, device)
    if progress is True:
        import sys

        def progress(msg: str) -> None:
            print(f"dcalign: {msg}", file=sys.stderr, flush=True)
    elif progress is False:
        progress = None
    if progress is not None and not callable(progress):
        raise TypeError("progress must be None, True, False or a callable taking a str")
    document, summary = _experiment_module()._run(path, ddir, n, dev,
                                                  "" if out is None else os.fspath(out), progress)
    return ExperimentResult(json.loads(document), summary)


def check_experiment(config: Union[str, os.PathLike], *,
                     data_dir: Optional[Union[str, os.PathLike]] = None,
                     trials: Optional[int] = None, device: Optional[str] = None) -> int:
    """Checks an experiment file without running a trial (``dcalign experiment --check``): its
    keys, dataset, sizes and every sweep point. Returns the number of sweep points; raises
    ValueError naming what is wrong."""
    path, ddir, n, dev = _experiment_arguments(config, data_dir, trials, device)
    return int(_experiment_module()._check(path, ddir, n, dev))
