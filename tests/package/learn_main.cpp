// Consumer of the data, learn and experiment components of the installed dcalign package: a
// user partition (data), a kNN classifier and its accuracy (learn), and the experiment loader's
// error for a missing file (experiment). Linking the three static layers pulls in LibTorch,
// LIBSVM, toml++, zlib and OpenSSL through the exported link interfaces. Prints
// "consumer_learn: ok" and returns 0, or names the failed check and returns 1.
#include <dcalign/data.hpp>
#include <dcalign/experiment.hpp>
#include <dcalign/learn.hpp>
#include <dcalign/random.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main() {
  try {
    // Two well-separated Gaussian classes in 3 dimensions.
    const dcalign::index_t n = 80, d = 3;
    dcalign::Rng rng(5);
    auto X = dcalign::random_normal<double>(n, d, rng);
    std::vector<double> y(static_cast<size_t>(n));
    for (dcalign::index_t i = 0; i < n; ++i) {
      y[static_cast<size_t>(i)] = static_cast<double>(i % 2);
      X(i, 0) += 8.0 * y[static_cast<size_t>(i)];
    }
    const auto parts = dcalign::data::partition_iid(n, 2, n / 2, 11);
    const auto train = dcalign::data::take_rows(X, parts[0]);
    const auto test = dcalign::data::take_rows(X, parts[1]);
    auto model = dcalign::learn::make_model("knn");
    model->fit(train, dcalign::data::take(y, parts[0]), 2);
    const double acc =
        dcalign::learn::accuracy(dcalign::data::take(y, parts[1]), model->predict(test));
    std::printf("consumer_learn: kNN accuracy %.3f (bound 0.95)\n", acc);
    if (acc < 0.95) {
      std::printf("consumer_learn: FAILED: accuracy\n");
      return 1;
    }
    bool threw = false;
    try {
      dcalign::experiment::load_config("/nonexistent/dcalign-consumer.toml");
    } catch (const std::exception& e) {
      threw = std::string(e.what()).find("dcalign-consumer.toml") != std::string::npos;
    }
    if (!threw) {
      std::printf("consumer_learn: FAILED: load_config did not name the missing file\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::printf("consumer_learn: error: %s\n", e.what());
    return 1;
  }
  std::printf("consumer_learn: ok\n");
  return 0;
}
