// Arrays in device memory through DLPack: align() on them, and copies between host and device.
#include "module/module.hpp"

using namespace dcalign;

namespace dcalign::pymodule {
namespace {

// ---------------------------------------------------------------- DLPack (device memory)
//
// align() on an array in GPU memory: the caller's library hands a DLPack capsule over (its
// __dlpack__(stream=1): ordered before the legacy default stream, on which the CUDA backend then
// runs), the anchors are read where they are (dcalign's layout) or gathered once on the device,
// and G comes back in device memory as a _DlpackArray, which the caller's from_dlpack takes
// without a copy. Host capsules (kDLCPU) take the same path on the CPU backend, which is how the
// CPU tests check it. The legacy capsule ("dltensor", DLPack 0.6 / dlpack.h of libdlpack-dev)
// is what every consumer accepts.

/// Owns a result buffer until it is handed out through DLPack, then the capsule owns it.
struct DlpackArray {
  std::unique_ptr<Buffer<float>> f32;
  std::unique_ptr<Buffer<double>> f64;
  std::vector<std::int64_t> shape, strides;  // elements
  DLDevice device{kDLCPU, 0};
  bool exported = false;
};

struct DlpackOwner {  // manager_ctx of an exported DLManagedTensor
  std::unique_ptr<Buffer<float>> f32;
  std::unique_ptr<Buffer<double>> f64;
  std::vector<std::int64_t> shape, strides;
};

void delete_dlpack(DLManagedTensor* m) {
  delete static_cast<DlpackOwner*>(m->manager_ctx);  // frees the buffer (stream-ordered on a GPU)
  delete m;
}

void delete_unused_capsule(PyObject* capsule) {
  // A capsule nobody consumed still owns its tensor (the DLPack protocol's rule).
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m && m->deleter) m->deleter(m);
  PyErr_Restore(type, value, trace);
}

py::capsule export_dlpack(DlpackArray& a) {
  if (a.exported)
    throw py::buffer_error(
        "this dcalign result was already handed out through __dlpack__; DLPack transfers it once "
        "(call from_dlpack on it once)");
  auto owner = std::make_unique<DlpackOwner>();
  owner->shape = a.shape;
  owner->strides = a.strides;
  auto m = std::make_unique<DLManagedTensor>();
  m->dl_tensor.data = a.f64 ? static_cast<void*>(a.f64->data()) : static_cast<void*>(a.f32->data());
  m->dl_tensor.device = a.device;
  m->dl_tensor.ndim = static_cast<int>(owner->shape.size());
  m->dl_tensor.dtype = DLDataType{kDLFloat, static_cast<std::uint8_t>(a.f64 ? 64 : 32), 1};
  m->dl_tensor.shape = owner->shape.data();
  m->dl_tensor.strides = owner->strides.data();
  m->dl_tensor.byte_offset = 0;
  owner->f32 = std::move(a.f32);
  owner->f64 = std::move(a.f64);
  m->manager_ctx = owner.release();
  m->deleter = &delete_dlpack;
  PyObject* capsule = PyCapsule_New(m.get(), "dltensor", &delete_unused_capsule);
  if (!capsule) {
    delete_dlpack(m.release());
    throw py::error_already_set();
  }
  m.release();
  a.exported = true;
  return py::reinterpret_steal<py::capsule>(capsule);
}

/// Takes the tensor of an unused DLPack capsule (renamed "used_dltensor": its deleter is ours to
/// call, which ~DlpackInput does).
struct DlpackInput {
  DLManagedTensor* m = nullptr;
  DlpackInput(const py::object& capsule, const std::string& what) {
    if (!PyCapsule_CheckExact(capsule.ptr()) || !PyCapsule_IsValid(capsule.ptr(), "dltensor"))
      throw py::value_error(
          what + ": expected an unused DLPack capsule (named 'dltensor', from __dlpack__())");
    m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!m) throw py::error_already_set();
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  }
  DlpackInput(const DlpackInput&) = delete;
  DlpackInput& operator=(const DlpackInput&) = delete;
  ~DlpackInput() {
    if (m && m->deleter) m->deleter(m);
  }
};

std::string dlpack_device_name(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda:" + std::to_string(d.device_id);
    case kDLCUDAHost:
      return "cuda_host:" + std::to_string(d.device_id);
    case kDLCUDAManaged:
      return "cuda_managed:" + std::to_string(d.device_id);
    default:
      return "DLPack device type " + std::to_string(static_cast<int>(d.device_type)) + ":" +
             std::to_string(d.device_id);
  }
}

void check_dlpack_device_and_dtype(const DLTensor& t, const std::string& what) {
  const DLDeviceType dt = t.device.device_type;
  if (dt != kDLCPU && dt != kDLCUDA && dt != kDLCUDAHost && dt != kDLCUDAManaged)
    throw py::value_error(what + ": array on " + dlpack_device_name(t.device) +
                          "; dcalign computes on the CPU and CUDA GPUs");
  if (t.dtype.code != kDLFloat || t.dtype.lanes != 1 || (t.dtype.bits != 32 && t.dtype.bits != 64))
    throw py::value_error(what + " must be float32 or float64, got DLPack type code " +
                          std::to_string(t.dtype.code) + " with " + std::to_string(t.dtype.bits) +
                          " bits x " + std::to_string(t.dtype.lanes) + " lanes");
}

template <typename T>
py::tuple align_dlpack_typed(const DLTensor& t, const CallOptions& o) {
  const index_t c = t.shape[0], a = t.shape[1], l = t.shape[2];
  detail::check_shape(c, a, l, "anchors");
  // Element strides; none given means C order (the DLPack convention).
  index_t sc = a * l, si = l, sj = 1;
  if (t.strides) {
    sc = t.strides[0];
    si = t.strides[1];
    sj = t.strides[2];
  }
  if (sc < 0 || si < 0 || sj < 0)
    throw py::value_error("anchors: negative strides (" + std::to_string(sc) + ", " +
                          std::to_string(si) + ", " + std::to_string(sj) +
                          "); expected non-negative strides (make the array contiguous first)");
  const T* base = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  if (reinterpret_cast<std::uintptr_t>(base) % alignof(T) != 0)
    throw py::value_error("anchors: the data pointer is not aligned to its dtype");
  BackendOptions bo;
  bo.threads = o.threads;
  Device device = Device::cpu;
  if (t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged) {
    device = Device::cuda;
    bo.device_id = t.device.device_id;
    bo.cuda_stream = cuda_legacy_default_stream();  // the stream 1 the producer was given
  }
  auto backend = make_backend(device, bo);
  auto& p = backend->primitives<T>();
  const bool view = (c == 1 || sc == a * l) && (a == 1 || si == 1) && (l == 1 || sj == a);
  DlpackArray out;
  out.shape = {c, l, l};
  out.strides = {l * l, 1, l};
  out.device = t.device.device_type == kDLCUDAHost ? DLDevice{kDLCPU, 0} : t.device;
  auto G = std::make_unique<Buffer<T>>(p.allocate(c * l * l));
  AlignReport report;
  {
    py::gil_scoped_release nogil;
    Buffer<T> gathered;
    StackView<const T> A(base, c, a, l);
    if (!view) {
      gathered = p.allocate(c * a * l);
      p.gather(base, sc, si, sj, gathered.stack(c, a, l));
      A = StackView<const T>(gathered.data(), c, a, l);
    }
    report = align_resident(p, A, G->stack(c, l, l), MatrixView<T>(), o.align);
    // G complete, and the anchors no longer read, before the caller gets G and its capsule is
    // released (only this stream waits).
    p.synchronize();
  }
  if constexpr (std::is_same_v<T, double>)
    out.f64 = std::move(G);
  else
    out.f32 = std::move(G);
  return py::make_tuple(std::move(out), report.to_json(-1), !view);
}

/// (G as a _DlpackArray, report JSON, copied) for the anchors of an unused DLPack capsule.
py::tuple align_dlpack(const py::object& capsule, const std::string& method, const py::dict& kw) {
  const CallOptions o = parse_options(method, kw);
  DlpackInput in(capsule, "anchors");
  const DLTensor& t = in.m->dl_tensor;
  if (t.ndim != 3)
    throw py::value_error("anchors must be a 3-D array (c, a, l), got " + std::to_string(t.ndim) +
                          " dimensions");
  check_dlpack_device_and_dtype(t, "anchors");
  return t.dtype.bits == 64 ? align_dlpack_typed<double>(t, o) : align_dlpack_typed<float>(t, o);
}

/// The values of a float32/float64 DLPack tensor of 2 or 3 dimensions (host or GPU memory) as a
/// new host array: an (n, m) matrix Fortran-ordered, a (c, a, l) stack in dcalign's layout. GPU
/// memory is gathered into that layout on the device (stream 1, which the producer was given)
/// and copied to the host once.
template <typename T>
py::array dlpack_to_host_typed(const DLTensor& t) {
  const bool stack = t.ndim == 3;
  const index_t c = stack ? t.shape[0] : 1, r = t.shape[t.ndim - 2], cl = t.shape[t.ndim - 1];
  index_t sc = r * cl, si = cl, sj = 1;  // C order when no strides are given
  if (t.strides) {
    sc = stack ? t.strides[0] : 0;
    si = t.strides[t.ndim - 2];
    sj = t.strides[t.ndim - 1];
  }
  if (c < 0 || r < 0 || cl < 0 || sc < 0 || si < 0 || sj < 0)
    throw py::value_error("DLPack tensor with a negative extent or stride; make it contiguous");
  const T* base = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  const py::ssize_t s = sizeof(T);
  py::array_t<T> out =
      stack ? py::array_t<T>({py::ssize_t(c), py::ssize_t(r), py::ssize_t(cl)},
                             {py::ssize_t(r * cl) * s, s, py::ssize_t(r) * s})
            : py::array_t<T>({py::ssize_t(r), py::ssize_t(cl)}, {s, py::ssize_t(r) * s});
  const index_t n = c * r * cl;
  T* dst = out.mutable_data();
  const bool gpu = t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged;
  if (n > 0) {
    py::gil_scoped_release nogil;
    if (!gpu) {
      make_backend(Device::cpu)
          ->primitives<T>()
          .gather(base, sc, si, sj, StackView<T>(dst, c, r, cl));
    } else {
      BackendOptions bo;
      bo.device_id = t.device.device_id;
      bo.cuda_stream = cuda_legacy_default_stream();
      auto backend = make_backend(Device::cuda, bo);
      auto& p = backend->primitives<T>();
      Buffer<T> packed = p.allocate(n);
      p.gather(base, sc, si, sj, packed.stack(c, r, cl));
      p.to_host(packed.data(), dst, n);
      p.synchronize();
    }
  }
  return std::move(out);
}

py::array dlpack_to_host(const py::object& capsule, const std::string& what) {
  DlpackInput in(capsule, what);
  const DLTensor& t = in.m->dl_tensor;
  if (t.ndim != 2 && t.ndim != 3)
    throw py::value_error(what + ": expected a 2-D or 3-D array, got " + std::to_string(t.ndim) +
                          " dimensions");
  check_dlpack_device_and_dtype(t, what);
  return t.dtype.bits == 64 ? dlpack_to_host_typed<double>(t) : dlpack_to_host_typed<float>(t);
}

/// A host float32/float64 array of 2 or 3 dimensions copied once into CUDA device `device`'s
/// memory, as a _DlpackArray there (Fortran order / dcalign's layout); device < 0 keeps it in
/// the CPU backend's memory (how the CPU tests check the export).
template <typename T>
DlpackArray host_to_device_typed(const py::array& x0, int device) {
  const py::array x = as_dtype<T>(x0);
  const bool stack = x.ndim() == 3;
  const index_t c = stack ? x.shape(0) : 1, r = x.shape(x.ndim() - 2), cl = x.shape(x.ndim() - 1),
                n = c * r * cl;
  std::vector<T> host(static_cast<size_t>(n));
  copy_to_dc<T>(x, host.data());
  DlpackArray out;
  out.shape = stack ? std::vector<std::int64_t>{c, r, cl} : std::vector<std::int64_t>{r, cl};
  out.strides = stack ? std::vector<std::int64_t>{r * cl, 1, r} : std::vector<std::int64_t>{1, r};
  BackendOptions bo;
  if (device >= 0) {
    bo.device_id = device;
    bo.cuda_stream = cuda_legacy_default_stream();
    out.device = DLDevice{kDLCUDA, device};
  }
  auto backend = make_backend(device >= 0 ? Device::cuda : Device::cpu, bo);
  auto& p = backend->primitives<T>();
  auto buffer = std::make_unique<Buffer<T>>(p.allocate(n));
  {
    py::gil_scoped_release nogil;
    p.to_device(host.data(), buffer->data(), n);
    p.synchronize();
  }
  if constexpr (std::is_same_v<T, double>)
    out.f64 = std::move(buffer);
  else
    out.f32 = std::move(buffer);
  return out;
}

DlpackArray host_to_device(const py::array& x, int device) {
  if (x.ndim() != 2 && x.ndim() != 3)
    throw py::value_error("expected a 2-D or 3-D array, got " + std::to_string(x.ndim()) +
                          " dimensions");
  if (py::isinstance<py::array_t<float>>(x)) return host_to_device_typed<float>(x, device);
  return host_to_device_typed<double>(x, device);
}

}  // namespace

void bind_dlpack(py::module_& m) {
  // The class first: the functions' signatures (and the stubs generated from them) then name it.
  py::class_<DlpackArray>(m, "_DlpackArray",
                          "An alignment result in a backend's memory (a GPU's, or the host's), "
                          "handed to the caller's from_dlpack once, without a copy.")
      .def(
          "__dlpack__",
          [](DlpackArray& a, const py::object& stream, const py::kwargs&) {
            // The result is complete when align returns (its stream was synchronised), so a
            // consumer's stream needs no wait.
            (void)stream;
            return export_dlpack(a);
          },
          py::arg("stream") = py::none())
      .def("__dlpack_device__",
           [](const DlpackArray& a) {
             return py::make_tuple(static_cast<int>(a.device.device_type), a.device.device_id);
           })
      .def_property_readonly("shape", [](const DlpackArray& a) {
        return py::make_tuple(a.shape[0], a.shape[1], a.shape[2]);
      });
  m.def("_align_dlpack", &align_dlpack);
  m.def("_dlpack_to_host", &dlpack_to_host);
  m.def("_host_to_device", &host_to_device);
#if DCALIGN_HAVE_CUDA
  m.attr("_built_with_cuda") = true;
#else
  m.attr("_built_with_cuda") = false;
#endif
}

}  // namespace dcalign::pymodule
