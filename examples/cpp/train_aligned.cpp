// Data Collaboration end to end with the library API and LibTorch (examples/README.md).
//
//  1. Users: each holds private samples of one 3-class problem (synthetic: Gaussian classes in
//     a 4-dimensional latent space, embedded in 20 features with noise), draws a secret basis
//     F_i (its own top-l subspace, Haar-mixed) and releases X~_i = X_i F_i and A_i = A F_i for
//     the shared anchor A (dcalign/user.hpp).
//  2. Analyst: stacks the A_i into a [c, a, l] tensor (a view of the dcalign::Stack, no copy),
//     aligns it with dcalign::torch_api::align (ODC), maps every X~_i with transform(X~_i, G_i),
//     and trains a small LibTorch MLP on the stacked aligned data. With --device cuda the
//     released matrices move to the GPU once and everything after that (the alignment on
//     dcalign's CUDA backend, the transforms, the training) stays there.
//  3. Evaluation: each user maps its own held-out samples by F_i G_i; the model's accuracy on
//     them is printed. Exit status 1 when it is below --min-accuracy (chance is 1/3).
//
//   train_aligned [--users 4] [--samples 150] [--epochs 300] [--min-accuracy 0.8] [--seed 1]
//                 [--device cpu|cuda]
// Python twin: examples/python/torch_training.py.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "dcalign/random.hpp"
#include "dcalign/torch.hpp"
#include "dcalign/user.hpp"

namespace {

using dcalign::index_t;
using dcalign::Matrix;

constexpr index_t kFeatures = 20, kLatent = 4, kClasses = 3, kDim = 4, kAnchorRows = 200;

struct Samples {
  Matrix<double> X;  // n x kFeatures
  std::vector<int64_t> y;
};

// n samples of the shared problem: class means in the latent space, a fixed embedding B.
Samples draw(index_t n, const Matrix<double>& means, const Matrix<double>& B, dcalign::Rng& rng) {
  Samples s{Matrix<double>(n, kFeatures), std::vector<int64_t>(static_cast<size_t>(n))};
  const auto z = dcalign::random_normal<double>(n, kLatent, rng);
  const auto noise = dcalign::random_normal<double>(n, kFeatures, rng);
  for (index_t i = 0; i < n; ++i) {
    const index_t k = static_cast<index_t>(rng.below(kClasses));
    s.y[static_cast<size_t>(i)] = k;
    for (index_t f = 0; f < kFeatures; ++f) {
      double v = 0.1 * noise(i, f);
      for (index_t d = 0; d < kLatent; ++d) v += (means(k, d) + z(i, d)) * B(f, d);
      s.X(i, f) = v;
    }
  }
  return s;
}

// A column-major dcalign matrix as an [rows, cols] tensor on `device` (on the CPU a view: the
// matrix must outlive it; on a GPU one copy).
at::Tensor view(Matrix<double>& M, const torch::Device& device) {
  return torch::from_blob(M.data(), {M.rows(), M.cols()}, {1, M.rows()}, torch::kFloat64)
      .to(device);
}

double accuracy(torch::nn::Sequential& model, const at::Tensor& X, const std::vector<int64_t>& y) {
  torch::NoGradGuard no_grad;
  const auto pred = model->forward(X.to(torch::kFloat32)).argmax(1);
  const auto truth = torch::tensor(y, torch::kInt64).to(X.device());
  return pred.eq(truth).to(torch::kFloat64).mean().item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  index_t users = 4, samples = 150;
  int epochs = 300;
  double min_accuracy = 0.8;
  std::uint64_t seed = 1;
  std::string device_name = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i], val = argv[i + 1];
    if (opt == "--users")
      users = std::atoll(val.c_str());
    else if (opt == "--samples")
      samples = std::atoll(val.c_str());
    else if (opt == "--epochs")
      epochs = std::atoi(val.c_str());
    else if (opt == "--min-accuracy")
      min_accuracy = std::atof(val.c_str());
    else if (opt == "--seed")
      seed = std::strtoull(val.c_str(), nullptr, 10);
    else if (opt == "--device")
      device_name = val;
    else {
      std::fprintf(stderr, "train_aligned: unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (device_name != "cpu" && device_name != "cuda") {
    std::fprintf(stderr, "train_aligned: --device %s: expected cpu or cuda\n", device_name.c_str());
    return 2;
  }
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr,
                 "train_aligned: --device cuda: LibTorch sees no CUDA GPU (it was built without "
                 "CUDA, or no GPU is visible); use --device cpu\n");
    return 1;
  }
  const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
  try {
    torch::manual_seed(seed);
    torch::set_num_threads(1);
    dcalign::Rng rng(seed);
    auto means = dcalign::random_normal<double>(kClasses, kLatent, rng);
    for (index_t k = 0; k < kClasses; ++k)
      for (index_t d = 0; d < kLatent; ++d) means(k, d) *= 3.0;
    const auto B = dcalign::random_normal<double>(kFeatures, kLatent, rng);

    // 1. Users: private data, secret bases, released representations.
    const auto anchor = dcalign::make_anchor<double>(kAnchorRows, kFeatures,
                                                     dcalign::AnchorKind::uniform, seed + 7);
    std::vector<dcalign::User<double>> people;
    std::vector<Samples> tests;
    std::vector<Matrix<double>> released_data, released_anchors;
    std::vector<int64_t> labels;
    for (index_t i = 0; i < users; ++i) {
      Samples train = draw(samples, means, B, rng);
      tests.push_back(draw(samples / 2, means, B, rng));
      people.emplace_back(train.X, "user " + std::to_string(i + 1));
      people.back().choose_secret_basis(kDim, dcalign::Mixing::haar, seed * 1000 + i, true);
      released_data.push_back(people.back().release_data());
      released_anchors.push_back(people.back().release_anchor(anchor));
      labels.insert(labels.end(), train.y.begin(), train.y.end());
    }

    // 2. Analyst: align the anchors as a tensor in dcalign's layout (on the CPU read in place;
    //    on a GPU the stack is copied there once, in the same layout, and read in place there).
    auto stack = dcalign::Stack<double>::from_matrices(released_anchors);
    const auto A = torch::from_blob(stack.data(), {users, kAnchorRows, kDim},
                                    {kAnchorRows * kDim, 1, kAnchorRows}, torch::kFloat64)
                       .to(device);
    const auto [G, report] = dcalign::torch_api::align(A);
    std::printf("aligned %lld users with %s on %s: objective %.3e, orthogonality error %.1e, %s\n",
                static_cast<long long>(users), report.method.c_str(), device.str().c_str(),
                report.objective, report.orthogonality_error,
                dcalign::torch_api::takes_without_copy(A) ? "anchors read in place" : "copied");
    std::vector<at::Tensor> aligned;
    for (index_t i = 0; i < users; ++i)
      aligned.push_back(dcalign::torch_api::transform(view(released_data[i], device), G[i]));
    const auto X = torch::cat(aligned).to(torch::kFloat32);
    const auto y = torch::tensor(labels, torch::kInt64).to(device);

    torch::nn::Sequential model(torch::nn::Linear(kDim, 32), torch::nn::ReLU(),
                                torch::nn::Linear(32, kClasses));
    torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
    for (int epoch = 0; epoch < epochs; ++epoch) {
      optimizer.zero_grad();
      const auto loss = torch::nn::functional::cross_entropy(model->forward(X), y);
      loss.backward();
      optimizer.step();
      if (epoch + 1 == epochs)
        std::printf("trained %d epochs, loss %.4f\n", epochs, loss.item<double>());
    }

    // 3. Each user maps its held-out samples by F_i G_i: (Y F_i) G_i.
    std::vector<at::Tensor> mapped;
    std::vector<int64_t> test_labels;
    for (index_t i = 0; i < users; ++i) {
      auto projected = people[i].project(tests[i].X);
      const auto Yi = dcalign::torch_api::transform(view(projected, device), G[i]);
      std::printf("  user %lld: test accuracy %.3f\n", static_cast<long long>(i + 1),
                  accuracy(model, Yi, tests[i].y));
      mapped.push_back(Yi);
      test_labels.insert(test_labels.end(), tests[i].y.begin(), tests[i].y.end());
    }
    const double acc = accuracy(model, torch::cat(mapped), test_labels);
    std::printf("test accuracy %.3f over %zu samples (threshold %.2f, chance %.2f)\n", acc,
                test_labels.size(), min_accuracy, 1.0 / kClasses);
    if (acc < min_accuracy) {
      std::printf("FAILED: accuracy below the threshold\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_aligned: error: %s\n", e.what());
    return 1;
  }
  std::printf("train_aligned: ok\n");
  return 0;
}
