#pragma once
// Precision promotion: float32 matrices recomputed in float64 on the same backend
// (Primitives::float64()), for the few users whose rank float32 arithmetic cannot resolve
// although their float32 inputs determine it (src/core/promote.cpp).
#include <vector>

#include "dcalign/backend.hpp"

namespace dcalign::core {

/// The matrices `which` of a float32 stack (any layout, backend memory), widened to float64
/// into new memory of p.float64(): contiguous, which.size() x (rows x cols). In backend memory
/// (gather, to_float64), no transfer through the host.
Buffer<double> widen(Primitives<float>& p, StackView<const float> M,
                     const std::vector<index_t>& which);

/// Rounds which.size() contiguous float64 matrices (rows x cols each, memory of p.float64())
/// to float32 into the positions `which` of `out` (any layout).
void narrow(Primitives<float>& p, const double* src, StackView<float> out,
            const std::vector<index_t>& which);

}  // namespace dcalign::core
