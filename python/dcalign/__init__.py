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
``np.ascontiguousarray(A.transpose(0, 2, 1)).transpose(0, 2, 1)``) is passed to the library
without a copy; any other layout or dtype conversion costs one copy. ``report["input_copied"]``
says which happened. G comes back in the same layout, shape (c, l, l), with A[i] @ G[i] the
aligned anchor of user i.

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

from ._core import NumericalError
# ArrayLike (the annotation of array arguments) and the test hook _buffer_address_used stay
# reachable as dcalign.ArrayLike and dcalign._buffer_address_used, as before the split.
from ._align import (ArrayLike, _buffer_address_used, align, as_stack, blas_info, cuda_available,
                     methods, options)
from ._aligner import Aligner
from ._evaluation import (analytic_gaussian, communication, dr_privacy, one_way_anova,
                          paired_t_test, reconstruction_error, two_way_anova)
from ._experiments import ExperimentResult, check_experiment, run_experiment
from ._user import make_anchor, release, secret_basis, top_right_singular_vectors, transform

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

