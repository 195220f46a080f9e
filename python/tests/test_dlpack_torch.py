"""pytest suite of the Python bindings, part 2: arrays through DLPack (host capsules, device
arrays, faked and real), torch tensors, and the BLAS the module runs."""
import json

import numpy as np
import pytest

import dcalign
from helpers import make_anchors, numpy_odc, fortran_stack


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
