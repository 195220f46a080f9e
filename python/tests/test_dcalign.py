"""pytest suite of the Python bindings (scripts/test.sh runs it in a fresh virtual environment).

The references are independent NumPy implementations written here:
  ODC        G_i = U V^T with U S V^T = svd(A_i^T A_r O), O = I (target_rotation="identity");
  Imakura    Z = top-l left singular vectors of [A_1 ... A_c] (right="identity"),
             G_i = lstsq(A_i, Z).
"""
import json
import os
import subprocess

import numpy as np
import pytest

import dcalign


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


# ---------------------------------------------------------------- agreement with NumPy


@pytest.mark.parametrize("layout", ["C", "F"])
def test_odc_matches_numpy(layout):
    A = make_anchors()
    X = A if layout == "C" else fortran_stack(A)
    G, report = dcalign.align(X, method="odc", target_rotation="identity")
    assert G.shape == (5, 4, 4) and G.dtype == np.float64
    np.testing.assert_allclose(G, numpy_odc(A), atol=1e-10)
    assert report["method"] == "odc" and report["users"] == 5
    assert report["anchor_rows"] == 60 and report["dim"] == 4
    assert report["precision"] == "float64"
    assert report["seconds"]["total"] > 0
    # A[i] @ G[i] is the aligned anchor; for ODC the objective is sum ||A_i G_i - A_r||^2.
    obj = sum(np.linalg.norm(A[i] @ G[i] - A[0]) ** 2 for i in range(5))
    assert report["objective"] == pytest.approx(obj, rel=1e-8)
    # The report names the BLAS kernel set that ran, the one blas_info() reports.
    assert report["blas"]["kernels"] == dcalign.blas_info()["kernels"] != ""


def test_odc_reference_user_and_explicit_target():
    A = make_anchors(seed=1)
    G, _ = dcalign.align(A, target_rotation="identity", reference_user=2)
    np.testing.assert_allclose(G, numpy_odc(A, r=2), atol=1e-10)
    Z = np.random.default_rng(5).standard_normal((60, 4))
    G, _ = dcalign.align(A, target=Z)
    np.testing.assert_allclose(G, numpy_odc(A, Z=Z), atol=1e-10)
    # A supplied O: target A_r O.
    O, _ = np.linalg.qr(np.random.default_rng(6).standard_normal((4, 4)))
    G, _ = dcalign.align(A, rotation=O)
    np.testing.assert_allclose(G, numpy_odc(A, Z=A[0] @ O), atol=1e-10)


def test_imakura_matches_numpy():
    A = make_anchors(seed=2)
    G, report = dcalign.align(A, method="imakura", right="identity")
    ref = numpy_imakura(A)
    # Singular vectors are defined up to sign: align the column signs on user 0.
    s = np.sign(np.sum(G[0] * ref[0], axis=0))
    np.testing.assert_allclose(G * s, ref, atol=1e-9)
    assert report["method"] == "imakura"


def test_float32():
    A = make_anchors(seed=3)
    G32, report = dcalign.align(A.astype(np.float32), target_rotation="identity")
    assert G32.dtype == np.float32 and report["precision"] == "float32"
    np.testing.assert_allclose(G32, numpy_odc(A), atol=2e-4)
    G32f, report = dcalign.align(fortran_stack(A.astype(np.float32)), target_rotation="identity")
    assert report["input_copied"] is False
    np.testing.assert_array_equal(G32, G32f)


@pytest.mark.parametrize("method", ["odc", "imakura", "kawakami", "gopp"])
def test_every_method_runs(method):
    A = make_anchors(seed=4)
    G, report = dcalign.align(A, method=method, seed=3)
    assert G.shape == (5, 4, 4) and np.all(np.isfinite(G))
    assert report["method"] == method


def test_options():
    A = make_anchors(seed=4)
    _, r = dcalign.align(A, evaluate=False, threads=1, polar="svd", seed=7)
    assert r["evaluated"] is False
    _, r = dcalign.align(A, consensus=True)
    assert r["consensus_objective"] is not None
    G1, _ = dcalign.align(A, method="imakura", svd="randomized", oversampling=5,
                          power_iterations=1, seed=2)
    G2, _ = dcalign.align(A, method="imakura", svd="randomized", oversampling=5,
                          power_iterations=1, seed=2)
    np.testing.assert_array_equal(G1, G2)
    _, r = dcalign.align(A, method="gopp", gopp_init="odc", gopp_tolerance=1e-6,
                         gopp_max_iterations=3)
    assert r["iterations"] <= 3
    _, r = dcalign.align(A, method="kawakami", kawakami_form="eigen")
    assert r["method"] == "kawakami"


# ---------------------------------------------------------------- copies


def test_no_copy_for_fortran_ordered_slices():
    A = fortran_stack(make_anchors(c=3, a=50, l=6))
    assert A[0].flags.f_contiguous and not A.flags.c_contiguous
    _, report = dcalign.align(A)
    assert report["input_copied"] is False
    assert dcalign._buffer_address_used(A) == A.ctypes.data
    # Read-only memory is fine: the library only reads the anchors.
    A.setflags(write=False)
    _, report = dcalign.align(A)
    assert report["input_copied"] is False
    assert dcalign.as_stack(A) is A


def test_copy_for_other_layouts():
    A = make_anchors(c=3, a=50, l=6)  # C order
    _, report = dcalign.align(A)
    assert report["input_copied"] is True
    assert dcalign._buffer_address_used(A) != A.ctypes.data
    # Non-contiguous views and byte-swapped arrays are copied (once) too, and give the same G.
    G_ref, _ = dcalign.align(A, target_rotation="identity")
    big = np.zeros((3, 100, 6))
    big[:, ::2, :] = A
    G, report = dcalign.align(big[:, ::2, :], target_rotation="identity")
    assert report["input_copied"] is True
    np.testing.assert_allclose(G, G_ref, atol=1e-12)
    G, report = dcalign.align(A.astype(">f8"), target_rotation="identity")
    np.testing.assert_allclose(G, G_ref, atol=1e-12)


def test_G_layout_is_dcalign_layout():
    G, _ = dcalign.align(make_anchors(c=3, a=30, l=5))
    s = G.itemsize
    assert G.strides == (25 * s, s, 5 * s)


# ---------------------------------------------------------------- errors


def test_unknown_option_is_type_error():
    with pytest.raises(TypeError, match="target_rotaton"):
        dcalign.align(make_anchors(), target_rotaton="identity")


def test_wrong_option_type_is_type_error():
    with pytest.raises(TypeError, match="seed"):
        dcalign.align(make_anchors(), seed="1")
    with pytest.raises(TypeError, match="evaluate"):
        dcalign.align(make_anchors(), evaluate="no")


@pytest.mark.parametrize("opts, message", [
    (dict(target_rotation="bogus"), "target_rotation"),
    (dict(method="nope"), "nope"),
    (dict(svd="fast"), "svd"),
    (dict(polar="qr"), "qr"),
    (dict(seed=-1), "seed"),
    (dict(reference_user=9), "reference"),
])
def test_bad_values_are_value_error(opts, message):
    with pytest.raises(ValueError, match=message):
        dcalign.align(make_anchors(), **opts)


def test_bad_anchors_are_value_error():
    A = make_anchors()
    A[1, 3, 2] = np.nan
    with pytest.raises(ValueError, match="row 3, column 2"):
        dcalign.align(A)
    with pytest.raises(ValueError, match="3-D"):
        dcalign.align(np.zeros((4, 5)))
    with pytest.raises(ValueError, match="float32 or float64"):
        dcalign.align(np.ones((2, 5, 2), dtype=np.int64))
    with pytest.raises(ValueError):
        dcalign.align(make_anchors(a=3, l=4))  # l > a
    with pytest.raises(ValueError):
        dcalign.align(np.zeros((0, 5, 2)))


def test_backend_error_is_runtime_error():
    if dcalign.cuda_available():
        pytest.skip("a CUDA backend is available here")
    with pytest.raises(RuntimeError, match="CUDA"):
        dcalign.align(make_anchors(), device="cuda")


@pytest.mark.gpu
def test_cuda_backend_matches_the_cpu():
    if not dcalign.cuda_available():
        pytest.skip("no usable GPU (or a module without the CUDA backend)")
    A = make_anchors(seed=41)
    G_cpu, _ = dcalign.align(A, target_rotation="identity")
    G_gpu, report = dcalign.align(A, target_rotation="identity", device="cuda")
    # The same method on two backends: rounding-level agreement in float64.
    np.testing.assert_allclose(G_gpu, G_cpu, atol=1e-10)
    assert report["device"] == "cuda"


def test_module_needs_no_cuda_libraries_to_load():
    """The CUDA runtime is linked statically and cuBLAS / cuSOLVER are opened on first use, so
    the module imports on a machine without a CUDA toolkit or driver (pyproject.toml)."""
    import shutil

    readelf = shutil.which("readelf")
    if not readelf:
        pytest.skip("readelf (binutils) is not installed")
    out = subprocess.run([readelf, "-d", dcalign._core.__file__], check=True,
                         capture_output=True, text=True).stdout
    needed = [line for line in out.splitlines() if "(NEEDED)" in line]
    assert needed, out
    for lib in ("libcudart", "libcublas", "libcusolver", "libcuda.so"):
        assert not any(lib in line for line in needed), needed


def test_io_errors_are_os_error(tmp_path):
    with pytest.raises(OSError):
        dcalign.Aligner.load(tmp_path / "missing")
    model = dcalign.Aligner()
    model.fit(make_anchors())
    model.save(tmp_path / "m")
    target = tmp_path / "m" / "target.npy"
    target.write_bytes(target.read_bytes()[:100])
    with pytest.raises(OSError, match="target.npy"):
        dcalign.Aligner.load(tmp_path / "m")
    (tmp_path / "m" / "model.json").write_text("{ not json")
    with pytest.raises(OSError, match="model.json"):
        dcalign.Aligner.load(tmp_path / "m")


@pytest.mark.parametrize("kind, cls", [
    ("invalid", ValueError),
    ("io", OSError),
    ("numerical", dcalign.NumericalError),
    ("backend", RuntimeError),
    ("error", RuntimeError),
])
def test_exception_translation(kind, cls):
    with pytest.raises(cls, match="test: "):
        dcalign._core._throw_for_test(kind)


def test_numerical_error_hierarchy():
    assert issubclass(dcalign.NumericalError, ArithmeticError)
    assert issubclass(dcalign.NumericalError, ValueError)


# ---------------------------------------------------------------- Aligner


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_aligner_enrol_equals_batch_for_odc(dtype, atol):
    A = make_anchors(c=6, seed=8, dtype=dtype)
    G_batch, _ = dcalign.align(A, target_rotation="identity")
    model = dcalign.Aligner()
    G_fit, _ = model.fit(A[:1], method="odc", target_rotation="identity")
    np.testing.assert_allclose(G_fit[0], G_batch[0], atol=atol)
    for i in range(1, 6):
        G_i, rep = model.enroll(A[i])
        assert G_i.shape == (4, 4) and G_i.dtype == dtype
        np.testing.assert_allclose(G_i, G_batch[i], atol=atol)
        assert rep["users"] == 1 and rep["fitted_users"] == 1
    G_k, rep = model.enroll(A[1:])
    np.testing.assert_allclose(G_k, G_batch[1:], atol=atol)
    assert rep["users"] == 5 and len(rep["residual"]) == 5


def test_aligner_save_load(tmp_path):
    A = make_anchors(c=4, seed=9)
    model = dcalign.Aligner()
    model.fit(A[:3], method="imakura")
    G1, _ = model.enroll(A[3])
    model.save(tmp_path / "model")
    loaded = dcalign.Aligner.load(str(tmp_path / "model"))
    assert loaded.method == "imakura" and loaded.users == 3
    assert loaded.anchor_rows == 60 and loaded.dim == 4 and loaded.precision == "float64"
    np.testing.assert_array_equal(loaded.target, model.target)
    G2, _ = loaded.enroll(A[3])
    np.testing.assert_array_equal(G1, G2)
    meta = json.loads((tmp_path / "model" / "model.json").read_text())
    assert meta["method"] == "imakura"


def test_aligner_errors():
    model = dcalign.Aligner()
    with pytest.raises(ValueError, match="not fitted"):
        model.enroll(np.zeros((60, 4)))
    model.fit(make_anchors())
    with pytest.raises(ValueError):
        model.enroll(np.zeros((61, 4)) + 1.0)  # wrong shape
    bad = make_anchors()[0].copy()
    bad[2, 1] = np.inf
    with pytest.raises(ValueError):
        model.enroll(bad)
    with pytest.raises(TypeError):
        dcalign.Aligner().fit(make_anchors(), foo=1)


# ---------------------------------------------------------------- user side


def test_user_side_pipeline():
    """A whole round in Python: shared anchor, secret bases in user 1's span (SameSpan-Orth),
    released anchors, alignment. With ODC and O = I every A_i G_i equals A_1 G_1."""
    rng = np.random.default_rng(11)
    m, l, users = 12, 3, 4
    anchor = dcalign.make_anchor(80, m, kind="uniform", seed=42)
    assert anchor.shape == (80, m)
    np.testing.assert_array_equal(anchor, dcalign.make_anchor(80, m, kind="uniform", seed=42))
    assert not np.array_equal(anchor, dcalign.make_anchor(80, m, kind="normal", seed=42))
    data = [rng.standard_normal((50, m)) for _ in range(users)]
    V = dcalign.top_right_singular_vectors(data[0], l)
    np.testing.assert_allclose(V.T @ V, np.eye(l), atol=1e-12)
    F = [dcalign.secret_basis(data[i], l, mixing="haar", seed=100 + i, subspace=V)
         for i in range(users)]
    for Fi in F:
        assert Fi.shape == (m, l)
        np.testing.assert_allclose(Fi.T @ Fi, np.eye(l), atol=1e-12)
    released = [dcalign.release(data[i], F[i]) for i in range(users)]
    np.testing.assert_allclose(released[1], data[1] @ F[1], atol=1e-12)
    A = np.stack([dcalign.release(anchor, Fi) for Fi in F])
    G, _ = dcalign.align(A, target_rotation="identity")
    for i in range(users):
        np.testing.assert_allclose(A[i] @ G[i], A[0] @ G[0], atol=1e-10)
    X_hat = dcalign.transform(released[2], G[2])
    np.testing.assert_allclose(X_hat, released[2] @ G[2], atol=1e-12)
    # Own-span secret basis, float32 stays float32.
    F32 = dcalign.secret_basis(data[1].astype(np.float32), l, seed=1)
    assert F32.dtype == np.float32 and F32.shape == (m, l)


def test_user_side_errors():
    with pytest.raises(ValueError):
        dcalign.make_anchor(10, 3, kind="cauchy")
    with pytest.raises(ValueError):
        dcalign.release(np.ones((5, 4)), np.ones((3, 2)))
    with pytest.raises(ValueError):
        dcalign.secret_basis(np.ones((5, 4)), 2, mixing="gauss")


# ---------------------------------------------------------------- DLPack


class _FakeArray:
    """An array of another library, seen only through DLPack: __dlpack__ and __dlpack_device__
    delegate to a NumPy array; its module's from_dlpack wraps a result back."""

    def __init__(self, a, device=(1, 0)):
        self._a, self._device = a, device

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device


def _writable(a):
    if a.flags.writeable:
        return a
    try:
        a.flags.writeable = True  # NumPy < 2: the producer's memory is writable, only flagged
        return a
    except ValueError:
        return a.copy()


def _fake_module(monkeypatch):
    import sys
    import types

    mod = types.ModuleType("fakearray")
    # NumPy < 2 marks an array from np.from_dlpack read-only and refuses to export it through
    # DLPack again; the other library's own array is writable, so a writable view stands in.
    mod.from_dlpack = lambda x: _FakeArray(_writable(np.from_dlpack(x)))
    monkeypatch.setitem(sys.modules, "fakearray", mod)
    monkeypatch.setattr(_FakeArray, "__module__", "fakearray")
    return mod


def test_dlpack_input_is_read_in_place_and_returned_in_kind(monkeypatch):
    _fake_module(monkeypatch)
    A = fortran_stack(make_anchors(seed=21))
    G, report = dcalign.align(_FakeArray(A), target_rotation="identity")
    assert isinstance(G, _FakeArray)
    assert report["input_copied"] is False
    assert dcalign._buffer_address_used(_FakeArray(A)) == A.ctypes.data
    np.testing.assert_allclose(G._a, numpy_odc(A), atol=1e-10)
    # Another layout: read through DLPack, then copied once into dcalign's layout.
    G2, report = dcalign.align(_FakeArray(np.ascontiguousarray(A)), target_rotation="identity")
    assert report["input_copied"] is True
    np.testing.assert_allclose(G2._a, G._a, atol=1e-12)


def test_dlpack_user_side_and_aligner(monkeypatch):
    _fake_module(monkeypatch)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 6))
    F = dcalign.secret_basis(_FakeArray(X), 3, seed=1)
    assert isinstance(F, _FakeArray)
    np.testing.assert_allclose(F._a, dcalign.secret_basis(X, 3, seed=1), atol=0)
    Xt = dcalign.release(_FakeArray(X), F)
    assert isinstance(Xt, _FakeArray)
    np.testing.assert_allclose(Xt._a, X @ F._a, atol=1e-12)
    A = make_anchors(seed=22)
    model = dcalign.Aligner()
    G, _ = model.fit(_FakeArray(A), target_rotation="identity")
    assert isinstance(G, _FakeArray)
    G_new, _ = model.enroll(_FakeArray(A[1]))
    assert isinstance(G_new, _FakeArray)
    np.testing.assert_allclose(G_new._a, G._a[1], atol=1e-10)


def test_dlpack_device_arrays_are_refused_by_name(monkeypatch):
    _fake_module(monkeypatch)
    A = make_anchors(seed=23)
    with pytest.raises(ValueError, match=r"anchors: array on rocm:0"):
        dcalign.align(_FakeArray(A, device=(10, 0)))
    with pytest.raises(ValueError, match=r"X: array on rocm:0"):
        dcalign.release(_FakeArray(A[0], device=(10, 0)), np.eye(4))
    if not dcalign._core._built_with_cuda:
        with pytest.raises(ValueError, match=r"X: array on cuda:1"):
            dcalign.release(_FakeArray(A[0], device=(2, 1)), np.eye(4))


class _FakeGpuArray(_FakeArray):
    """Says it lives on cuda:0 and records the stream its consumer asked for; its capsule is the
    NumPy array's (host memory), so the device path runs on the CPU backend here."""

    def __init__(self, a):
        super().__init__(a, device=(2, 0))
        self.streams = []

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        return self._a.__dlpack__()


def test_align_takes_gpu_arrays_through_dlpack(monkeypatch):
    _fake_module(monkeypatch)
    monkeypatch.setattr(_FakeGpuArray, "__module__", "fakearray")
    A = make_anchors(seed=24)
    fake = _FakeGpuArray(A)
    if not dcalign._core._built_with_cuda:
        with pytest.raises(ValueError, match=r"array on cuda:0, but this dcalign module was built "
                                             r"without its CUDA backend"):
            dcalign.align(fake)
        return
    G, report = dcalign.align(fake, target_rotation="identity")
    assert fake.streams == [1]  # ordered before the legacy default stream
    assert isinstance(G, _FakeArray) and report["input_copied"] is True  # C order: gathered
    np.testing.assert_allclose(G._a, numpy_odc(A), atol=1e-10)
    with pytest.raises(ValueError, match="device='cpu'"):
        dcalign.align(_FakeGpuArray(A), device="cpu")


def test_user_side_takes_gpu_arrays_with_one_copy_each_way(monkeypatch):
    if not dcalign._core._built_with_cuda:
        pytest.skip("a module without the CUDA backend refuses GPU arrays (tested above)")
    _fake_module(monkeypatch)
    monkeypatch.setattr(_FakeGpuArray, "__module__", "fakearray")
    sent = []
    to_device = dcalign._core._host_to_device

    def host_to_device(a, gpu):  # no GPU here: the CPU backend's memory stands in for cuda:0
        sent.append(gpu)
        return to_device(a, -1)

    monkeypatch.setattr(dcalign._core, "_host_to_device", host_to_device)
    rng = np.random.default_rng(6)
    X = rng.standard_normal((30, 7))
    fake = _FakeGpuArray(X)
    F = dcalign.secret_basis(fake, 3, seed=2)
    assert fake.streams == [1] and sent == [0] and isinstance(F, _FakeArray)
    np.testing.assert_array_equal(F._a, dcalign.secret_basis(X, 3, seed=2))
    Xt = dcalign.release(_FakeGpuArray(X), F)
    np.testing.assert_allclose(Xt._a, X @ F._a, atol=1e-12)
    A = make_anchors(seed=27)
    model = dcalign.Aligner()
    G, _ = model.fit(_FakeGpuArray(A), target_rotation="identity")
    np.testing.assert_allclose(G._a, numpy_odc(A), atol=1e-10)
    assert sent == [0, 0, 0]


def test_dlpack_to_host_and_back_on_the_host():
    X = np.arange(24.0).reshape(2, 3, 4)
    for arr in (X, np.asfortranarray(X[0]), X[1], X.astype(np.float32)):
        host = dcalign._core._dlpack_to_host(arr.__dlpack__(), "X")
        np.testing.assert_array_equal(host, arr)
        back = np.from_dlpack(dcalign._core._host_to_device(host, -1))
        np.testing.assert_array_equal(back, arr)
        assert back.dtype == arr.dtype
    with pytest.raises(ValueError, match="X: expected a 2-D or 3-D array"):
        dcalign._core._dlpack_to_host(np.zeros(4).__dlpack__(), "X")
    with pytest.raises(ValueError, match="X must be float32 or float64"):
        dcalign._core._dlpack_to_host(np.zeros((2, 2), dtype=np.int32).__dlpack__(), "X")


def test_dlpack_capsules_on_the_host():
    """The device path's C++ half (capsule, strides, gather, export) on host capsules."""
    A = make_anchors(seed=25)
    ref = numpy_odc(A)
    for arr, copied in ((A, True), (fortran_stack(A), False), (A.astype(np.float32), True)):
        G, report_json, was_copied = dcalign._core._align_dlpack(
            arr.__dlpack__(), "odc", {"target_rotation": "identity"})
        assert was_copied is copied and json.loads(report_json)["method"] == "odc"
        assert G.shape == (A.shape[0], A.shape[2], A.shape[2]) and G.__dlpack_device__() == (1, 0)
        out = np.from_dlpack(G)
        assert out.dtype == arr.dtype and out.strides[1] == out.itemsize  # column-major G_i
        np.testing.assert_allclose(out, ref, atol=1e-10 if arr.dtype == np.float64 else 1e-4)
        with pytest.raises(BufferError, match="once"):
            np.from_dlpack(G)
    capsule = A.__dlpack__()
    dcalign._core._align_dlpack(capsule, "odc", {})
    with pytest.raises(ValueError, match="unused DLPack capsule"):
        dcalign._core._align_dlpack(capsule, "odc", {})  # consumed: renamed used_dltensor
    with pytest.raises(ValueError, match="float32 or float64"):
        dcalign._core._align_dlpack(np.ones((2, 5, 3), dtype=np.int64).__dlpack__(), "odc", {})
    with pytest.raises(ValueError, match="3-D"):
        dcalign._core._align_dlpack(A[0].__dlpack__(), "odc", {})
    with pytest.raises(ValueError, match="unused DLPack capsule"):
        dcalign._core._align_dlpack(A, "odc", {})


@pytest.mark.gpu
def test_torch_cuda_tensors_stay_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not (torch.cuda.is_available() and dcalign.cuda_available()):
        pytest.skip("needs a GPU, PyTorch with CUDA and a module with the CUDA backend")
    A = make_anchors(seed=26)
    ref = numpy_odc(A)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # work queued on another stream before the call
        t = torch.from_numpy(A).cuda().mul_(2.0).div_(2.0)
        G, report = dcalign.align(t, target_rotation="identity")
    assert G.is_cuda and G.dtype == torch.float64 and report["input_copied"] is True
    np.testing.assert_allclose(G.cpu().numpy(), ref, atol=1e-10)
    layout = torch.from_numpy(fortran_stack(A)).cuda()  # dcalign's layout: read in place
    G2, report = dcalign.align(layout.transpose(1, 2).contiguous().transpose(1, 2),
                               target_rotation="identity")
    assert report["input_copied"] is False
    np.testing.assert_allclose(G2.cpu().numpy(), ref, atol=1e-10)


def test_dlpack_capsules_of_torch_on_the_host():
    torch = pytest.importorskip("torch")
    A = make_anchors(seed=25)
    ref = numpy_odc(A)
    t = torch.from_numpy(A).float()
    G, _, copied = dcalign._core._align_dlpack(torch.utils.dlpack.to_dlpack(t), "odc",
                                               {"target_rotation": "identity"})
    out = torch.from_dlpack(G)
    assert copied and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-4)


# ---------------------------------------------------------------- torch


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    A = make_anchors(seed=12)
    t = torch.from_numpy(fortran_stack(A))
    G, report = dcalign.align(t, target_rotation="identity")
    assert isinstance(G, torch.Tensor) and G.dtype == torch.float64
    assert report["input_copied"] is False
    np.testing.assert_allclose(G.numpy(), numpy_odc(A), atol=1e-10)
    G, report = dcalign.align(torch.from_numpy(A).float(), target_rotation="identity")
    assert G.dtype == torch.float32 and report["input_copied"] is True


def test_torch_user_side_aligner_and_no_copies():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(31)
    X = rng.standard_normal((60, 8))
    tX = torch.from_numpy(X)
    F = dcalign.secret_basis(tX, 3, seed=4, center=True)
    assert isinstance(F, torch.Tensor) and F.dtype == torch.float64
    np.testing.assert_array_equal(F.numpy(), dcalign.secret_basis(X, 3, seed=4, center=True))
    Xt = dcalign.release(tX, F)
    assert isinstance(Xt, torch.Tensor)
    np.testing.assert_allclose(Xt.numpy(), X @ F.numpy(), atol=1e-12)
    # The anchors in dcalign's layout are read where the tensor keeps them.
    A = make_anchors(seed=32)
    t = torch.stack([torch.from_numpy(np.ascontiguousarray(a.T)) for a in A]).transpose(1, 2)
    assert t.shape == A.shape and t.stride() == (A.shape[1] * A.shape[2], 1, A.shape[1])
    assert dcalign._buffer_address_used(t, target_rotation="identity") == t.data_ptr()
    G, report = dcalign.align(t, target_rotation="identity")
    assert report["input_copied"] is False
    np.testing.assert_allclose(G.numpy(), numpy_odc(A), atol=1e-10)
    # transform and the Aligner return tensors; a tensor that requires grad is read, detached.
    out = dcalign.transform(Xt, G[0, :3, :3].contiguous())
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), Xt.numpy() @ G[0, :3, :3].numpy(), atol=1e-12)
    model = dcalign.Aligner()
    G_fit, _ = model.fit(t.clone().requires_grad_(True), target_rotation="identity")
    assert isinstance(G_fit, torch.Tensor) and not G_fit.requires_grad
    G_new, _ = model.enroll(torch.from_numpy(A[2]))
    assert isinstance(G_new, torch.Tensor)
    np.testing.assert_allclose(G_new.numpy(), G_fit[2].numpy(), atol=1e-10)


def test_blas_info_names_library_and_kernels():
    info = dcalign.blas_info()
    assert info["library"].startswith("OpenBLAS")
    assert info["kernels"]
    assert info["chosen_by"] in ("OpenBLAS", "dcalign", "OPENBLAS_CORETYPE",
                                 "DCALIGN_BLAS_KERNELS=library")
    assert info["threads"] >= 1


# ---------------------------------------------------------------- evaluation


def test_communication_matches_the_command():
    # `dcalign comm -c 10 --samples 100,200,...,1000 -a 500 -m 64 -l 20 -N 1e5 -q 16 --gamma 0
    #  -p 0.5 -R 40 --bandwidth 1e8 --rtt 0.05 --json x.json`, whose document this is too.
    r = dcalign.communication(samples=[100 * k for k in range(1, 11)], anchor_rows=500,
                              features=64, dim=20, model_parameters=1e5, bits=16, gamma=0,
                              participation=0.5, rounds=40, bandwidth=1e8, rtt=0.05)
    assert r["inputs"]["users"] == 10 and r["inputs"]["mean_samples"] == 550.0
    assert r["bytes"]["uplink_per_user"] == 42000.0
    assert r["bytes"]["uplink_max_user"] == 60000.0
    assert r["bytes"]["downlink"] == 2008000.0
    assert r["bytes"]["dc"] == 2428000.0
    assert r["bytes"]["fl"] == 80000000.0
    assert r["break_even_rounds"] == pytest.approx(1.214, rel=1e-12)
    assert r["break_even_rounds_ceil"] == 2.0 and r["dc_sends_less"] is True
    assert r["transfer"]["dc_seconds"] == pytest.approx(0.34424, rel=1e-12)
    assert r["transfer"]["fl_client_seconds"] == pytest.approx(5.28, rel=1e-12)
    # The defaults are the paper's worked example; no bandwidth, no transfer times.
    d = dcalign.communication()
    assert d["inputs"]["users"] == 100 and d["transfer"] is None
    with pytest.raises(ValueError, match="participation"):
        dcalign.communication(participation=0)
    with pytest.raises(TypeError, match="unknown option 'user'"):
        dcalign.communication(user=3)


# Reference values: SciPy 1.10.1 (scipy.stats.ttest_rel, f_oneway, f.sf) on these inputs.
X_T = [0.91, 0.88, 0.93, 0.90, 0.87, 0.92, 0.89, 0.94]
Y_T = [0.89, 0.88, 0.90, 0.88, 0.86, 0.90, 0.88, 0.91]


def test_paired_t_test_matches_scipy():
    r = dcalign.paired_t_test(X_T, Y_T)
    assert r["n"] == 8 and r["df"] == 7
    assert r["t"] == pytest.approx(4.781910357447818, rel=1e-12)
    assert r["p"] == pytest.approx(0.0020078344736297244, rel=1e-9)
    d = np.subtract(X_T, Y_T)
    assert r["cohens_dz"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
    assert r["ci_lower"] < d.mean() < r["ci_upper"]
    g = dcalign.paired_t_test(np.array(X_T), np.array(Y_T), alternative="greater")
    assert g["p"] == pytest.approx(0.0010039172368148622, rel=1e-9)
    with pytest.raises(ValueError, match="alternative"):
        dcalign.paired_t_test(X_T, Y_T, alternative="two_sided")
    with pytest.raises(ValueError):
        dcalign.paired_t_test([1.0], [2.0])


def test_anovas_match_scipy_and_the_definitions():
    r = dcalign.one_way_anova([3.1, 2.9, 3.4, 3.0], [3.6, 3.8, 3.5], [2.7, 2.8, 3.0, 2.6, 2.9])
    assert r["F"] == pytest.approx(20.44622093023259, rel=1e-12)
    assert r["p"] == pytest.approx(0.0004497124106168043, rel=1e-9)
    assert r["df_between"] == 2 and r["df_within"] == 9
    y = [5.1, 4.9, 6.2, 6.0, 7.1, 6.8, 5.5, 5.8, 6.1, 6.4, 8.0, 7.7]
    a = ["a1"] * 6 + ["a2"] * 6
    b = ["b1", "b1", "b2", "b2", "b3", "b3"] * 2
    t = dcalign.two_way_anova(y, a, b)
    # Balanced: the sums of squares of the cell-mean decomposition (computed with NumPy).
    assert t["A"]["ss"] == pytest.approx(0.9633333333333355, rel=1e-10)
    assert t["B"]["ss"] == pytest.approx(8.704999999999995, rel=1e-10)
    assert t["A:B"]["ss"] == pytest.approx(0.2916666666666661, rel=1e-9)
    assert t["ss_residual"] == pytest.approx(0.22, rel=1e-9) and t["df_residual"] == 6
    assert t["A"]["p"] == pytest.approx(0.0021661213912288037, rel=1e-8)
    assert t["B"]["p"] == pytest.approx(1.497763932287916e-05, rel=1e-8)
    assert t["A:B"]["p"] == pytest.approx(0.07948893296477164, rel=1e-8)
    t3 = dcalign.two_way_anova(y, a, b, sum_of_squares="type3")
    assert t3["A"]["ss"] == pytest.approx(t["A"]["ss"], rel=1e-9)  # balanced: types agree
    with pytest.raises(ValueError, match="sum of squares"):
        dcalign.two_way_anova(y, a, b, sum_of_squares="type1")


def test_privacy_measurements():
    # Balle and Wang's own example (tests/privacy/test_privacy.cpp holds it for the C++ side).
    g = dcalign.analytic_gaussian(1.0, 1e-5)
    assert g["sigma"] == pytest.approx(3.73063, abs=1e-5)
    assert g["classical_sigma"] > g["sigma"]
    with pytest.raises(ValueError):
        dcalign.analytic_gaussian(0.0, 1e-5)
    rng = np.random.default_rng(8)
    X = rng.standard_normal((30, 6))
    F = rng.standard_normal((6, 2))
    r = dcalign.dr_privacy(X, F, epsilon=0.9)
    P = F @ np.linalg.pinv(F)  # the projector onto span(F)
    want = np.linalg.norm(X - X @ P, axis=1) / np.linalg.norm(X, axis=1)
    np.testing.assert_allclose(r["ratios"], want, rtol=1e-10)
    assert r["min"] == pytest.approx(want.min(), rel=1e-10)
    assert r["kept"] == [k for k in range(30) if want[k] >= 0.9]
    e = dcalign.reconstruction_error(X, X @ P)
    assert e["relative"] == pytest.approx(np.linalg.norm(X - X @ P) / np.linalg.norm(X), rel=1e-10)
    np.testing.assert_allclose(e["per_row"], want, rtol=1e-10)
    with pytest.raises(ValueError, match="2-D"):
        dcalign.dr_privacy(X[0], F, epsilon=0.5)


# ---------------------------------------------------------------- experiments

SMALL_EXPERIMENT = """name = "py_small"
dataset = "synthetic"
users = 4
samples_per_user = 60
test_samples = 400
anchor_rows = 200
dim = 8
conditions = ["DiffSpan-Orth"]
methods = ["central", "local", "imakura", "odc"]
models = ["svm", "knn"]
metrics = ["accuracy"]
trials = 3
seed = 3
privacy = ["collusion", "dr"]

[[statistics]]
test = "paired-t"
a = "odc"
b = "imakura"
"""


def _has_experiments():
    try:
        from dcalign import _experiment  # noqa: F401
    except ImportError:
        return False
    return True


def _cli():
    """The dcalign command of the build ($DCALIGN_CLI; scripts/test-python.sh sets it)."""
    cli = os.environ.get("DCALIGN_CLI")
    if not cli or not os.access(cli, os.X_OK):
        pytest.skip("DCALIGN_CLI does not name the dcalign command (scripts/test-python.sh sets it)")
    return cli


def test_run_experiment_without_the_learning_layer_says_how(tmp_path):
    if _has_experiments():
        pytest.skip("this module has the learning layer")
    with pytest.raises(RuntimeError, match="DCALIGN_WITH_LEARN=ON"):
        dcalign.run_experiment(tmp_path / "x.toml")


def test_run_experiment_matches_the_command(tmp_path):
    if not _has_experiments():
        pytest.skip("this module was built without the learning layer")
    cli = _cli()
    cfg = tmp_path / "py_small.toml"
    cfg.write_text(SMALL_EXPERIMENT)
    messages = []
    result = dcalign.run_experiment(cfg, progress=messages.append, out=tmp_path / "py")
    assert isinstance(result, dcalign.ExperimentResult)
    assert any("trial 3 of 3" in m for m in messages), messages
    # 3 trials x (Central, Local, Imakura-DC, ODC) x 2 models, and the privacy measurements
    scores = [r for r in result.records if r["metric"] == "accuracy"]
    assert len(scores) == 24 and result.name == "py_small"
    assert {"collusion_error", "dr_min_ratio"} <= {r["metric"] for r in result.records}
    assert {r["method"] for r in scores} == {"central", "local", "imakura", "odc"}
    assert all(0 <= r["value"] <= 1 for r in scores)
    subprocess.run([cli, "experiment", str(cfg), "--out", str(tmp_path / "cli")], check=True,
                   capture_output=True)
    with open(tmp_path / "cli" / "py_small.json") as f:
        command = json.load(f)
    key = ("trial", "condition", "method", "model", "metric")
    ours = {tuple(r[k] for k in key): r["value"] for r in result.records}
    theirs = {tuple(r[k] for k in key): r["value"] for r in command["records"]}
    assert ours.keys() == theirs.keys()
    for k in ours:  # the same seeds and code: the same scores and privacy measurements
        assert ours[k] == pytest.approx(theirs[k], abs=1e-12), k
    assert len(result.statistics) == len(command["statistics"]) == 2
    for s, t in zip(result.statistics, command["statistics"]):
        assert s["model"] == t["model"] and s["p"] == pytest.approx(t["p"], rel=1e-12)
    # out= wrote the command's three files, the JSON the same document.
    with open(tmp_path / "py" / "py_small.json") as f:
        assert json.load(f)["records"] == result.records
    assert (tmp_path / "py" / "py_small.csv").exists() and (tmp_path / "py" / "py_small.md").exists()
    assert "odc" in result.summary
    assert dcalign.check_experiment(cfg) == 1
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            result.to_pandas()
    else:
        frame = result.to_pandas()
        assert len(frame) == len(result.records) and list(frame.columns[:5]) == list(key)


def test_enroll_matches_the_command(tmp_path):
    cli = _cli()
    A = make_anchors(seed=28)
    model = dcalign.Aligner()
    model.fit(A[:3], method="odc", target_rotation="identity")
    model.save(tmp_path / "model")
    new = np.ascontiguousarray(A[3:])
    np.save(tmp_path / "new.npy", new)
    subprocess.run([cli, "enroll", "--model", str(tmp_path / "model"), "--anchors",
                    str(tmp_path / "new.npy"), "--out", str(tmp_path / "G.npy")], check=True,
                   capture_output=True)
    G_cli = np.load(tmp_path / "G.npy")
    G_py, report = dcalign.Aligner.load(tmp_path / "model").enroll(new)
    assert G_py.shape == G_cli.shape == (A.shape[0] - 3, A.shape[2], A.shape[2])
    np.testing.assert_allclose(G_py, G_cli, atol=1e-12)  # the same library, the same input
    assert len(report["residual"]) == A.shape[0] - 3


def test_run_experiment_errors(tmp_path):
    if not _has_experiments():
        pytest.skip("this module was built without the learning layer")
    with pytest.raises(TypeError, match="path"):
        dcalign.run_experiment({"dataset": "synthetic"})
    with pytest.raises(ValueError, match="trials = 0"):
        dcalign.run_experiment(tmp_path / "x.toml", trials=0)
    with pytest.raises(ValueError, match="device"):
        dcalign.run_experiment(tmp_path / "x.toml", device="tpu")
    with pytest.raises(ValueError, match="cannot open"):
        dcalign.run_experiment(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL_EXPERIMENT.replace('dim = 8', 'dim = "eight"'))
    with pytest.raises(ValueError, match="dim"):
        dcalign.check_experiment(bad)
    cfg = tmp_path / "py_small.toml"
    cfg.write_text(SMALL_EXPERIMENT)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="[Nn]ot a directory"):  # checked before the first trial
        dcalign.run_experiment(cfg, out=blocker)
    with pytest.raises(TypeError, match="progress"):
        dcalign.run_experiment(cfg, progress="yes")
