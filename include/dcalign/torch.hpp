#pragma once
// LibTorch tensor API (target dcalign::torch, package component `torch`): aligns a stack of
// anchor representations held in an at::Tensor and applies a change of basis to a user's data.
//
//   auto [G, report] = dcalign::torch_api::align(anchors);   // anchors: [c, a, l]
//   at::Tensor aligned = dcalign::torch_api::transform(X_tilde, G[i]);   // X~_i G_i
//
// Layout. dcalign stores every A_i (a x l) column-major, so a [c, a, l] tensor whose strides
// are (a*l, 1, a) -- e.g. A.transpose(1, 2).contiguous().transpose(1, 2), or torch::from_blob
// over a dcalign::Stack -- is read in place, without a copy. Any other layout (a C-contiguous
// tensor included) is copied once into that layout before the alignment; the report then has a
// phase "copy_anchors" in AlignReport::seconds. takes_without_copy() tells which case applies.
// The returned G has shape [c, l, l] and the same convention: G[i] is l x l with A[i] @ G[i]
// the aligned anchor, each matrix stored column-major (strides (l*l, 1, l)).
//
// Devices. A CPU tensor is aligned by the CPU backend. A CUDA tensor is aligned by dcalign's
// CUDA backend on the tensor's GPU, in device memory (align_resident), when this build has the
// CUDA backend and the GPU is usable; otherwise BackendError says why. G lives on the anchors'
// device. No autograd: G is computed without gradient tracking.
//
// Streams. Built against a CUDA LibTorch, the CUDA backend runs on the caller's current stream
// (c10::cuda::getCurrentCUDAStream() of the tensor's device, adopted through
// BackendOptions::cuda_stream): after the work that produced the anchors, G ordered on that
// stream like any PyTorch op's result, and no device-wide synchronisation (only that stream
// waits, where a value of the report must reach the host). Against a LibTorch without CUDA
// (which has no CUDA tensors to give) the backend keeps its own stream.
//
// Errors (dcalign/error.hpp): InvalidInput for a tensor that is not 3-D, an empty dimension, a
// dtype other than float32/float64, or NaN/Inf (naming the user, row and column, as the CLI
// does); BackendError for an unsupported device; the alignment's own errors (rank deficiency,
// shape, options) as from dcalign::align.
#include <ATen/core/Tensor.h>

#include <utility>

#include "dcalign/align.hpp"

namespace dcalign::torch_api {

/// Whether align() reads `anchors` in place: a 3-D float32/float64 tensor with strides
/// (a*l, 1, a) (size-1 dimensions may have any stride).
bool takes_without_copy(const at::Tensor& anchors);

/// The change-of-basis matrices G_i for anchors [c, a, l] (float32 or float64, CPU or CUDA),
/// as a [c, l, l] tensor of the same dtype and device, and the report.
std::pair<at::Tensor, AlignReport> align(const at::Tensor& anchors, const AlignOptions& opts = {});

/// X @ G for a user's released data X [n, l] and that user's G [l, l] (e.g. G[i] from align):
/// the user's data in the collaboration space. Same dtype (float32/float64) and device for both.
at::Tensor transform(const at::Tensor& X, const at::Tensor& G);

}  // namespace dcalign::torch_api
