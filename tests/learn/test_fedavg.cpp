// FedAvg (include/dcalign/learn.hpp): one round with one client is plain MLP training with the
// same seed; the central model is the n_k-weighted mean of the clients' returned weights; the
// byte counters count the tensors exchanged; participation draws the stated number of clients;
// bad options and bad client data fail before training.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/learn.hpp"
#include "learn/toy_data.hpp"

namespace dcalign::learn {
namespace {

using testing::blobs;
using testing::Data;

ModelOptions small_mlp(std::uint64_t seed = 7) {
  ModelOptions o;
  o.seed = seed;
  o.threads = 1;
  o.mlp.hidden_layers = {12, 6};
  o.mlp.early_stopping = false;
  return o;
}

// Rows [begin, begin + count) of a data set, as one client's share.
Data rows(const Data& d, index_t begin, index_t count) {
  Data out{Matrix<double>(count, d.X.cols()), {}};
  for (index_t i = 0; i < count; ++i) {
    for (index_t j = 0; j < d.X.cols(); ++j) out.X(i, j) = d.X(begin + i, j);
    out.y.push_back(d.y[static_cast<size_t>(begin + i)]);
  }
  return out;
}

struct Clients {
  std::vector<Matrix<double>> X;
  std::vector<std::vector<double>> y;
};

Clients split(const Data& d, const std::vector<index_t>& sizes) {
  Clients c;
  index_t at = 0;
  for (index_t n : sizes) {
    Data part = rows(d, at, n);
    c.X.push_back(std::move(part.X));
    c.y.push_back(std::move(part.y));
    at += n;
  }
  return c;
}

TEST(FedAvg, OneRoundWithOneClientIsPlainTrainingWithTheSameSeed) {
  const Data data = blobs(90, 3, 2.0, 5, 4);
  for (int epochs : {1, 3}) {
    ModelOptions o = small_mlp();
    o.mlp.batch_size = 16;
    o.mlp.max_epochs = epochs;
    o.mlp.n_iter_no_change = 1000;  // the plain fit must run all its epochs too
    auto plain = make_model("mlp", o);
    plain->fit(data.X, data.y, 3);

    FedAvgOptions f;
    f.rounds = 1;
    f.local_epochs = epochs;
    f.batch_size = 16;
    auto fed = fit_fedavg({data.X}, {data.y}, 3, o, f);
    const auto a = plain->parameters(), b = fed->parameters();
    ASSERT_EQ(a.size(), b.size());
    ASSERT_GT(a.size(), 0u);
    for (size_t j = 0; j < a.size(); ++j) ASSERT_EQ(a[j], b[j]) << "epochs " << epochs << ", " << j;
    EXPECT_EQ(plain->predict(data.X), fed->predict(data.X));
  }
}

TEST(FedAvg, CentralModelIsTheSampleWeightedMeanOfTheReturnedWeights) {
  const Data data = blobs(70, 3, 2.0, 11, 3);
  const Clients c = split(data, {10, 20, 40});
  FedAvgOptions f;
  f.rounds = 3;
  f.local_epochs = 2;
  f.batch_size = 8;
  f.record_client_parameters = true;
  int rounds_seen = 0;
  double largest_gap_to_plain_mean = 0;
  auto check = [&](const FedAvgRound& r, const Model& central) {
    ++rounds_seen;
    ASSERT_EQ(r.participants, (std::vector<index_t>{0, 1, 2}));
    ASSERT_EQ(r.client_parameters.size(), 3u);
    const auto got = central.parameters();
    const double w[3] = {10.0 / 70, 20.0 / 70, 40.0 / 70};
    for (size_t j = 0; j < got.size(); ++j) {
      double expected = 0, plain = 0;
      for (int k = 0; k < 3; ++k) {
        expected += w[k] * r.client_parameters[static_cast<size_t>(k)][j];
        plain += r.client_parameters[static_cast<size_t>(k)][j] / 3;
      }
      // The mean is formed in double and rounded once to the float32 weights: half an ulp.
      ASSERT_NEAR(got[j], expected, 0.6 * std::abs(expected) * 0x1.0p-23 + 1e-30)
          << "round " << r.round << ", parameter " << j;
      largest_gap_to_plain_mean = std::max(largest_gap_to_plain_mean, std::abs(got[j] - plain));
    }
  };
  auto model = fit_fedavg(c.X, c.y, 3, small_mlp(), f, check);
  EXPECT_EQ(rounds_seen, 3);
  // The weights matter: the unweighted mean is a different model.
  EXPECT_GT(largest_gap_to_plain_mean, 1e-4);
  EXPECT_EQ(model->info().iterations, 3);
  EXPECT_EQ(model->info().loss_curve.size(), 3u);
}

TEST(FedAvg, ByteCountersCountTheParametersExchangedWithTheParticipants) {
  const index_t d = 5;
  const Data data = blobs(80, 4, 2.0, 13, d);
  const Clients c = split(data, {20, 20, 20, 20});
  FedAvgOptions f;
  f.rounds = 6;
  f.participation = 0.5;  // 2 of 4 clients per round
  ModelOptions o = small_mlp();
  // 5 -> 12 -> 6 -> 4 outputs (softmax for K = 4), float32.
  const double params = (5 * 12 + 12) + (12 * 6 + 6) + (6 * 4 + 4);
  const double bytes = 4 * params;
  std::vector<std::vector<index_t>> seen;
  auto model = fit_fedavg(c.X, c.y, 4, o, f, [&](const FedAvgRound& r, const Model& central) {
    ASSERT_EQ(r.participants.size(), 2u);
    EXPECT_LT(r.participants[0], r.participants[1]);
    EXPECT_LT(r.participants[1], 4);
    EXPECT_EQ(r.downlink_bytes, 2 * bytes);
    EXPECT_EQ(r.uplink_bytes, 2 * bytes);
    EXPECT_TRUE(r.client_parameters.empty());
    EXPECT_EQ(static_cast<double>(central.parameters().size()), params);
    seen.push_back(r.participants);
  });
  ASSERT_EQ(seen.size(), 6u);
  // The draw changes from round to round (6 rounds of one fixed pair would be 1 in 6^5).
  EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](const auto& s) { return s != seen[0]; }));

  // In double precision every parameter is 8 bytes.
  o.mlp.float64 = true;
  f.rounds = 1;
  f.participation = 1;
  fit_fedavg(c.X, c.y, 4, o, f, [&](const FedAvgRound& r, const Model&) {
    EXPECT_EQ(r.downlink_bytes, 4 * 8 * params);
    EXPECT_EQ(r.uplink_bytes, 4 * 8 * params);
  });
}

TEST(FedAvg, SameSeedSameModelAndItLearns) {
  const Data train = blobs(400, 3, 3.0, 17, 4), test = blobs(300, 3, 3.0, 18, 4);
  const Clients c = split(train, {100, 100, 100, 100});
  FedAvgOptions f;
  f.rounds = 10;
  ModelOptions o = small_mlp(3);
  o.mlp.learning_rate = 1e-2;  // 4 Adam steps per client and round: a larger step learns in 10
  auto a = fit_fedavg(c.X, c.y, 3, o, f);
  auto b = fit_fedavg(c.X, c.y, 3, o, f);
  o.seed = 4;
  auto other = fit_fedavg(c.X, c.y, 3, o, f);
  EXPECT_EQ(a->parameters(), b->parameters());
  EXPECT_NE(a->parameters(), other->parameters());
  EXPECT_GT(accuracy(test.y, a->predict(test.X)), 0.85);
  // The round losses fall: the last is well below the first.
  const auto& loss = a->info().loss_curve;
  ASSERT_EQ(loss.size(), 10u);
  EXPECT_LT(loss.back(), 0.5 * loss.front()) << loss.front() << " " << loss.back();
}

TEST(FedAvg, BadOptionsAndClientsFailBeforeTraining) {
  const Data data = blobs(40, 2, 2.0, 19, 3);
  const Clients c = split(data, {20, 20});
  const ModelOptions o = small_mlp();
  auto fails = [&](FedAvgOptions f, const std::string& needle) {
    try {
      fit_fedavg(c.X, c.y, 2, o, f);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  FedAvgOptions f;
  f.rounds = 0;
  fails(f, "rounds R = 0");
  f = {};
  f.local_epochs = 0;
  fails(f, "local_epochs E = 0");
  f = {};
  f.batch_size = 0;
  fails(f, "batch_size B = 0");
  for (double p : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    f = {};
    f.participation = p;
    fails(f, "participation p");
  }

  EXPECT_THROW(fit_fedavg({}, {}, 2, o, {}), InvalidInput);
  Clients bad = c;
  bad.X[1] = Matrix<double>(20, 4);
  try {
    fit_fedavg(bad.X, bad.y, 2, o, {});
    ADD_FAILURE() << "no error for a feature mismatch";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("client 1 has 4 features"), std::string::npos) << e.what();
  }
  bad = c;
  bad.X[1](3, 2) = std::numeric_limits<double>::quiet_NaN();
  try {
    fit_fedavg(bad.X, bad.y, 2, o, {});
    ADD_FAILURE() << "no error for a NaN feature";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("client 1"), std::string::npos) << e.what();
  }
  bad = c;
  bad.y[0][5] = 2;  // not a class of K = 2
  EXPECT_THROW(fit_fedavg(bad.X, bad.y, 2, o, {}), InvalidInput);
  bad = c;
  bad.y.pop_back();
  EXPECT_THROW(fit_fedavg(bad.X, bad.y, 2, o, {}), InvalidInput);
  ModelOptions bad_model = o;
  bad_model.mlp.learning_rate = 0;
  EXPECT_THROW(fit_fedavg(c.X, c.y, 2, bad_model, {}), InvalidInput);
}

}  // namespace
}  // namespace dcalign::learn
