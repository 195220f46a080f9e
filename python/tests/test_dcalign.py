"""pytest suite of the Python bindings (scripts/test.sh runs it in a fresh virtual environment).

The references are independent NumPy implementations written here:
  ODC        G_i = U V^T with U S V^T = svd(A_i^T A_r O), O = I (target_rotation="identity");
  Imakura    Z = top-l left singular vectors of [A_1 ... A_c] (right="identity"),
             G_i = lstsq(A_i, Z).
"""
import json
import subprocess

import numpy as np
import pytest

import dcalign
from helpers import make_anchors, numpy_odc, numpy_imakura, fortran_stack


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
    (dict(method="imakura", svd="fast"), "svd"),
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
