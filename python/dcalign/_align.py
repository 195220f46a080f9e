"""The analyst's alignment: align, as_stack, the option schema and the machine
(re-exported by dcalign)."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import numpy as np

from . import _core
from ._core import NumericalError
from ._arrays import _align_on_device, _dc, _gpu_array, _precision, _to_numpy


ArrayLike = Any  # a NumPy array, anything np.asarray takes, or any object with __dlpack__

# The exception class comes from the compiled core; its documentation is kept here, with the
# rest of the package's.
NumericalError.__doc__ = """A numerical routine of dcalign failed.

Raised for ``dcalign::NumericalError`` of the C++ library: an iteration that did not converge,
a LAPACK routine that reported an error, or a result that is not finite (for example a noise
scale that overflows a double). It is a subclass of both ``ArithmeticError`` and
``ValueError``, so ``except ValueError`` also catches it; catch ``dcalign.NumericalError``
first to tell a numerical failure from bad input. Its message names the routine and what
failed.

Examples
--------
>>> import dcalign
>>> issubclass(dcalign.NumericalError, ArithmeticError)
True
>>> issubclass(dcalign.NumericalError, ValueError)
True

The analytic Gaussian mechanism's sigma for an absurdly small epsilon and a huge sensitivity
does not fit in a double:

>>> try:
...     dcalign.analytic_gaussian(1e-300, 1e-300, 1e300)
... except dcalign.NumericalError as e:
...     print("numerical failure:", "overflows a double" in str(e))
numerical failure: True
"""


def as_stack(anchors: ArrayLike) -> np.ndarray:
    """Return the anchors in dcalign's layout, copying them only when needed.

    dcalign keeps the anchor stack column-major with the slices back to back: each ``A[i]`` is
    Fortran-ordered and the c slices follow one another, so a float64 stack of shape
    (c, a, l) has the byte strides ``(a*l*8, 8, a*8)``. ``align`` reads such an array in place
    and copies any other layout once per call; converting once with ``as_stack`` moves that
    copy out of the calls, for example before aligning the same anchors with several methods.

    Parameters
    ----------
    anchors : array_like of shape (c, a, l)
        The anchors of c users (a rows, l columns each): a NumPy array or anything
        ``np.asarray`` takes, such as a nested list or a PyTorch CPU tensor, in host memory.
        The dtype is kept as it is; only a float32 or float64 stack reaches ``align`` without
        a copy.

    Returns
    -------
    numpy.ndarray of shape (c, a, l)
        ``np.asarray(anchors)`` itself when it already has dcalign's layout (the input array,
        or a NumPy view of another library's host array), else a copy in that layout,
        ``np.ascontiguousarray(A.transpose(0, 2, 1)).transpose(0, 2, 1)``, with the same
        values and dtype. Always a NumPy array, whatever the kind of the input.

    Raises
    ------
    ValueError
        ``anchors`` does not have exactly three dimensions.
    TypeError
        Raised by the array's own library when ``np.asarray`` cannot read it, e.g. for a
        tensor in GPU memory (pass such an array to ``align``, which reads it on the device).

    Examples
    --------
    >>> import numpy as np
    >>> import dcalign
    >>> A = np.random.default_rng(0).standard_normal((3, 8, 2))   # C order: not the layout
    >>> S = dcalign.as_stack(A)
    >>> S.shape, S.strides, S[0].flags.f_contiguous
    ((3, 8, 2), (128, 8, 64), True)
    >>> dcalign.as_stack(S) is S                    # already in the layout: no copy
    True
    >>> dcalign.align(A)[1]["input_copied"], dcalign.align(S)[1]["input_copied"]
    (True, False)
    """
    x = np.asarray(anchors)
    if x.ndim != 3:
        raise ValueError(f"anchors must be a 3-D array (c, a, l), got {x.ndim} dimensions")
    return x if _dc(x) else np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)


def align(anchors: ArrayLike, method: str = "odc",
          **options: Any) -> Tuple[Any, Dict[str, Any]]:
    """Compute the change-of-basis matrices G_i for the released anchors A_i.

    Each user i releases its anchor representation ``A[i]`` (the shared anchor in its secret
    basis); ``align`` finds one l x l matrix ``G[i]`` per user such that the aligned anchors
    ``A[i] @ G[i]`` agree, by the chosen method. This is the analyst's step of Data
    Collaboration analysis, the same computation as ``dcalign align``.

    Parameters
    ----------
    anchors : array of shape (c, a, l)
        float32 or float64 (the precision of the computation); a NumPy array or any array with
        ``__dlpack__`` (e.g. a ``torch.Tensor``). Each ``A[i]`` Fortran-ordered with slices
        back to back (the layout ``as_stack`` makes) is read in place; any other layout is
        copied once. An array in GPU memory (a CUDA tensor, a CuPy array) is aligned there by
        the CUDA backend (a module built with it) and G is returned on that GPU, in the
        caller's kind, without leaving the device; ``device`` then defaults to the array's.
    method : str, default "odc"
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
        ``A[i] @ G[i]`` the aligned anchor of user i; in dcalign's layout (each ``G[i]``
        Fortran-ordered). Host anchors give G in host memory, also with ``device="cuda"``.
    report : dict
        The dict of ``AlignReport::to_json`` (the keys of ``dcalign align --report``) plus
        ``input_copied`` (bool): ``method``, ``device``, ``precision``, ``users``,
        ``anchor_rows``, ``dim``, ``evaluated``, ``objective``, ``consensus_objective``,
        ``orthogonality_error``, ``constraint_error``, ``min_rank_ratio``, ``iterations``,
        ``promoted_users``, ``converged``, ``stop_reason``, ``gradient_norm``, ``blas`` (the
        host BLAS that ran, as ``blas_info()``) and ``seconds`` (one entry per phase and
        ``total``); ``svd`` and ``objective_history`` where the method has them. The
        reference page on file formats explains each key.

    Raises
    ------
    ValueError
        Bad input, with the library's message: anchors that are not 3-D, not float32 or
        float64, empty, with more columns than rows (l > a) or with a NaN or an infinity; an
        unknown method; an option that only other methods use (``gopp_tolerance`` with
        ``method="odc"``); an option value out of its range or an unknown choice; ``rotation`` or
        ``target`` of the wrong shape; an array on a device other than the CPU or a CUDA GPU,
        or a GPU array given to a module without the CUDA backend or with ``device="cpu"``.
    TypeError
        ``method`` is not a str; an option name that no method has (or that is not a Python
        keyword, such as ``precision``: the dtype decides it); an option of the wrong type
        (text for a number, anything but True or False for a flag); ``rotation`` or
        ``target`` that is not an array of numbers.
    RuntimeError
        The CUDA backend is unavailable: ``device="cuda"`` on a module built without it, or on
        a machine without a usable GPU and driver (``cuda_available()`` says which).
    dcalign.NumericalError
        A numerical failure during the alignment (a factorisation that does not converge, a
        result that is not finite).

    Examples
    --------
    Three users, 8 anchor rows, l = 2, aligned by ODC with user 0 as the reference and no
    rotation, so that user 0 keeps its basis:

    >>> import numpy as np
    >>> import dcalign
    >>> A = np.random.default_rng(0).standard_normal((3, 8, 2))
    >>> G, report = dcalign.align(A, "odc", target_rotation="identity")
    >>> G.shape, G.dtype
    ((3, 2, 2), dtype('float64'))
    >>> np.allclose(G[0], np.eye(2))
    True
    >>> report["method"], report["users"], report["orthogonality_error"] < 1e-12
    ('odc', 3, True)

    float32 anchors are aligned in float32; in dcalign's layout they are read in place:

    >>> G32, report = dcalign.align(dcalign.as_stack(A).astype(np.float32), "imakura")
    >>> G32.dtype, report["precision"], report["input_copied"]
    (dtype('float32'), 'float32', False)

    Bad input raises with the library's message:

    >>> dcalign.align(A, "procrustes")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: unknown alignment method 'procrustes'; expected one of: odc, imakura, ...
    >>> dcalign.align(A, gopp_tolerence=1e-8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: align() got an unexpected keyword argument 'gopp_tolerence' ...

    On a GPU (these lines need a machine with a CUDA GPU, a module built with the CUDA
    backend and PyTorch with CUDA, so they are not run here), a CUDA tensor is aligned where
    it is and G comes back as a CUDA tensor:

    >>> import torch  # doctest: +SKIP
    >>> G_gpu, report = dcalign.align(torch.from_numpy(A).cuda())  # doctest: +SKIP
    >>> G_gpu.is_cuda, report["device"]  # doctest: +SKIP
    (True, 'cuda')
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


def options() -> List[Dict[str, Any]]:
    """Return the option schema: one dict per option of the alignment.

    The same table checks the options of ``align()`` and ``Aligner.fit()``, of
    ``dcalign align``, experiment files, collaboration specs and saved models, and it writes
    the option list of ``align``'s documentation.

    Returns
    -------
    list of dict
        One dict per option, in the schema's order, each with the keys:

        - ``name``: the option's name;
        - ``python``, ``cli``, ``toml``, ``spec``, ``model``: its name at each entry point
          (the keyword of ``align``, the flag of ``dcalign align``, the key of an experiment
          file, of a collaboration spec and of a saved model), ``""`` where it has none;
        - ``type``: ``"integer"``, ``"real"``, ``"choice"`` or ``"flag"``;
        - ``expected``: the accepted values in words, such as ``"0 to 100"``;
        - ``default``: the default value, as text;
        - ``unit``: the unit of the value (``""`` for none);
        - ``help``: one line on what the option does;
        - ``methods``: the methods that use it (empty: every method);
        - ``route``: a further condition for it to apply (``""`` for none);
        - ``cli_negated``: whether the command line gives the flag as its negation
          (``--no-...``).

        A new list on every call.

    Examples
    --------
    >>> import dcalign
    >>> schema = {o["name"]: o for o in dcalign.options()}
    >>> o = schema["target_rotation"]
    >>> o["python"], o["cli"], o["type"], o["expected"], o["default"]
    ('target_rotation', '--target-rotation', 'choice', 'one of: haar, identity', 'haar')
    >>> o["methods"]
    ['odc', 'gopp']
    >>> schema["threads"]["methods"]                # used by every method
    []
    """
    return json.loads(_core._option_schema_json())


def methods() -> List[str]:
    """Return the names of the alignment methods, in the order of the method table.

    These are the values ``align``'s ``method`` takes: ``"odc"`` (ODC), ``"imakura"``
    (Imakura-DC), ``"kawakami"`` (Kawakami-DC), ``"gopp"`` (GOPP), ``"opp"`` (OPP), and
    ``"rdp-ls"`` and ``"rdp-opp"`` (RDP).

    Returns
    -------
    list of str
        The method names, a new list on every call.

    Examples
    --------
    >>> import dcalign
    >>> dcalign.methods()
    ['odc', 'imakura', 'kawakami', 'gopp', 'opp', 'rdp-ls', 'rdp-opp']
    """
    return list(_core._method_names())


def _options_doc() -> str:
    lines = []
    for o in options():
        if not o["python"]:
            continue
        used = ", ".join(o["methods"]) if o["methods"] else "every method"
        lines.append(f"        - ``{o['python']}`` ({o['expected']}; default {o['default']}; "
                     f"{used}): {o['help']}")
    return "\n".join(lines)


if align.__doc__:
    align.__doc__ = align.__doc__.replace("{methods}", " | ".join(f'"{m}"' for m in methods()))
    align.__doc__ = align.__doc__.replace("{options}", _options_doc())


def _buffer_address_used(anchors: ArrayLike, method: str = "odc", **options: Any) -> int:
    """Test hook: the address of the buffer the library read the anchors from."""
    x, _ = _to_numpy(anchors, "anchors")
    fn = _core._align_f64 if _precision(x, "anchors") == "f64" else _core._align_f32
    return int(fn(x, method, options)[2])


def cuda_available() -> bool:
    """Return whether ``align(..., device="cuda")`` can run on this machine.

    True when this module was built with the CUDA backend and a usable GPU with its driver is
    visible to the process. The module imports and runs without them (the CUDA runtime is
    linked statically and cuBLAS / cuSOLVER are opened on first use), so this is the check
    to make before asking for the GPU.

    Returns
    -------
    bool
        Whether the CUDA backend can start here. Never raises: a missing driver or GPU gives
        False (``align(..., device="cuda")`` then raises RuntimeError with the reason).

    Examples
    --------
    >>> import dcalign
    >>> isinstance(dcalign.cuda_available(), bool)
    True
    """
    return bool(_core.cuda_available())


def blas_info() -> Dict[str, Any]:
    """Return which host BLAS and which of its kernel sets this process uses.

    OpenBLAS picks its kernels when it loads; where it picked a set below what the CPU
    supports (a CPU newer than the library), dcalign loads the right set when the module is
    loaded, before the first BLAS call, unless the user chose: ``OPENBLAS_CORETYPE`` always
    wins, and ``DCALIGN_BLAS_KERNELS=library`` keeps the library's choice. Every alignment
    report repeats this dict as ``report["blas"]``.

    Returns
    -------
    dict
        ``library`` (str, e.g. ``"OpenBLAS 0.3.21"``), ``kernels`` (str, the kernel set in
        use, e.g. ``"SkylakeX"``), ``chosen_by`` (str: ``"OpenBLAS"``, ``"dcalign"``,
        ``"OPENBLAS_CORETYPE"`` or ``"DCALIGN_BLAS_KERNELS=library"``), ``reason`` (str, one
        sentence on why this set), ``cpu`` (str, the CPU's vector level, e.g. ``"AVX-512"``)
        and ``threads`` (int, the library's thread count).

    Examples
    --------
    >>> import dcalign
    >>> info = dcalign.blas_info()
    >>> sorted(info)
    ['chosen_by', 'cpu', 'kernels', 'library', 'reason', 'threads']
    >>> isinstance(info["threads"], int) and info["threads"] >= 1
    True
    """
    return dict(_core.blas_info())
