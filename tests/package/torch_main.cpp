// Consumer of the torch component of the installed dcalign package: aligns a [c, a, l] tensor
// in dcalign's column-major layout (taken without a copy) and checks that the aligned anchors
// A_i G_i of SameSpan-Orth users agree. Prints "consumer_torch: ok" and returns 0, or names the
// failed check and returns 1.
#include <dcalign/torch.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <vector>

int main() {
  try {
    const int64_t c = 3, a = 40, l = 4;
    at::manual_seed(3);
    // SameSpan-Orth: A_i = B E_i with one B (a x l) and orthogonal E_i.
    const auto B = at::rand({a, l}, at::kDouble);
    std::vector<at::Tensor> As;
    for (int64_t i = 0; i < c; ++i)
      As.push_back(at::matmul(B, std::get<0>(at::linalg_qr(at::randn({l, l}, at::kDouble)))));
    const auto A = at::stack(As).transpose(1, 2).contiguous().transpose(1, 2);
    if (!dcalign::torch_api::takes_without_copy(A)) {
      std::printf("consumer_torch: FAILED: column-major tensor not taken in place\n");
      return 1;
    }
    const auto [G, report] = dcalign::torch_api::align(A);
    const auto ref = dcalign::torch_api::transform(A[0], G[0]);
    double worst = 0;
    for (int64_t i = 1; i < c; ++i)
      worst =
          std::max(worst, (dcalign::torch_api::transform(A[i], G[i]) - ref).norm().item<double>() /
                              ref.norm().item<double>());
    std::printf(
        "consumer_torch: %s, max_i ||A_i G_i - A_1 G_1|| / ||A_1 G_1|| = %.2e (bound 1e-10)\n",
        report.method.c_str(), worst);
    if (!(worst <= 1e-10)) {
      std::printf("consumer_torch: FAILED: aligned anchors disagree\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::printf("consumer_torch: error: %s\n", e.what());
    return 1;
  }
  std::printf("consumer_torch: ok\n");
  return 0;
}
