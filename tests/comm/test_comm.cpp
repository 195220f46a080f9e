// Paper 001's communication model (eqs. 10-18) against the worked example of its section 2.3.
// Every expected value is written out by hand from the example's inputs (c = 100, n_i = 1000,
// a = 1000, m = 784, l = 100, N = 2.5e7, q = 32 so q/8 = 4 bytes, gamma = c), not obtained by
// calling the model a second time.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dcalign/comm.hpp"
#include "dcalign/error.hpp"

namespace dcalign {
namespace {

// Relative comparison: the example's byte counts are integers far above 2^24.
void expect_rel(double got, double want, double tol = 1e-12) {
  EXPECT_NEAR(got, want, tol * std::abs(want)) << "got " << got << ", want " << want;
}

TEST(Comm, WorkedExampleBytesPerEquation) {
  const CommEstimate e = estimate_communication(CommModel{});
  expect_rel(e.uplink_bytes_per_user, 800000.0);       // (1000 + 1000) 100 * 4
  expect_rel(e.uplink_bytes_max_user, 800000.0);       // every user holds 1000 samples
  expect_rel(e.uplink_bytes, 80000000.0);              // 100 users
  expect_rel(e.downlink_bytes_per_user, 100040000.0);  // (100^2 + 2.5e7) * 4
  expect_rel(e.downlink_bytes, 10004000000.0);
  expect_rel(e.anchor_bytes, 3136000.0);                 // 1000 * 784 * 4
  expect_rel(e.anchor_distribution_bytes, 313600000.0);  // gamma = c = 100 copies
  EXPECT_EQ(e.gamma, 100.0);
  EXPECT_EQ(e.mean_samples, 1000.0);
  // Eq. (19): 80e6 + 10004e6 + 313.6e6; the paper rounds it to 1.04e10.
  expect_rel(e.dc_bytes, 1.03976e10);
  EXPECT_NEAR(e.dc_bytes, 1.04e10, 0.005e10);
  // Eq. (20): 2 * 1 * 1 * 100 * 2.5e7 * 4.
  expect_rel(e.fl_bytes, 2.0e10);
  expect_rel(e.fl_bytes_per_round, 2.0e10);
  // "nearly a 50% reduction" and R* = 1.03976e10 / 2e10 at p = 1.
  EXPECT_TRUE(e.dc_sends_less);
  expect_rel(e.break_even_rounds, 0.51988);
  EXPECT_EQ(e.break_even_rounds_ceil, 1.0);
}

TEST(Comm, WorkedExampleVariants) {
  CommModel public_anchor;
  public_anchor.gamma = 0;  // a public or seeded anchor costs nothing to distribute
  expect_rel(estimate_communication(public_anchor).dc_bytes, 1.0084e10);
  CommModel fp16;
  fp16.bits = 16;  // q/8 = 2 bytes: every term halves
  const CommEstimate e = estimate_communication(fp16);
  expect_rel(e.dc_bytes, 5.1988e9);
  expect_rel(e.fl_bytes, 1.0e10);
}

TEST(Comm, BreakEvenRoundsOfThePaper) {
  // R* = B_DC / (2 p c N q / 8) = 1.03976e10 / (p 2e10) with gamma = c and 1.0084e10 /
  // (p 2e10) with gamma = 0; the notes' four-digit values beside the exact ones.
  struct Case {
    double p, gamma, exact, four_digits, ceil;
  } cases[] = {
      {0.1, 100, 1.03976e10 / 2e9, 5.1988, 6},  {0.25, 100, 1.03976e10 / 5e9, 2.0795, 3},
      {0.5, 100, 1.03976e10 / 1e10, 1.0398, 2}, {0.75, 100, 1.03976e10 / 1.5e10, 0.6932, 1},
      {1.0, 100, 1.03976e10 / 2e10, 0.5199, 1}, {0.1, 0, 1.0084e10 / 2e9, 5.0420, 6},
      {1.0, 0, 1.0084e10 / 2e10, 0.5042, 1},
  };
  for (const Case& k : cases) {
    CommModel m;
    m.participation = k.p;
    m.gamma = k.gamma;
    const double r = break_even_rounds(m);
    expect_rel(r, k.exact);
    EXPECT_NEAR(r, k.four_digits, 5e-5) << "p = " << k.p << ", gamma = " << k.gamma;
    const CommEstimate e = estimate_communication(m);
    EXPECT_EQ(e.break_even_rounds, r);
    EXPECT_EQ(e.break_even_rounds_ceil, k.ceil) << "p = " << k.p;
  }
  // The paper's sentence: "p = 0.1, (16) yields R* ~ 5.2 (for gamma = c)".
  CommModel m;
  m.participation = 0.1;
  EXPECT_NEAR(break_even_rounds(m), 5.2, 0.05);
}

TEST(Comm, FlAtTheBreakEvenSendsWhatDcSends) {
  for (double p : {0.1, 0.3, 1.0}) {
    CommModel m;
    m.participation = p;
    m.mean_samples = 37;
    m.gamma = 3.5;
    const double r = break_even_rounds(m);
    m.rounds = r;
    const CommEstimate at = estimate_communication(m);
    expect_rel(at.fl_bytes, at.dc_bytes, 1e-13);
    // Whole rounds: DC sends less from ceil(R*) on, and not one round earlier.
    m.rounds = std::ceil(r);
    EXPECT_TRUE(estimate_communication(m).dc_sends_less) << "p = " << p;
    m.rounds = std::ceil(r) - 1;
    EXPECT_FALSE(estimate_communication(m).dc_sends_less) << "p = " << p;
  }
}

TEST(Comm, BytesAreLinearInBitsAndBreakEvenIsNot) {
  // Eq. (17): B(q) = (q / q0) B(q0) for both protocols; q cancels in R*.
  CommModel base;
  base.participation = 0.4;
  base.rounds = 7;
  base.samples = std::vector<double>(100, 250.0);
  base.samples[3] = 4000;
  const CommEstimate e32 = estimate_communication(base);
  for (double q : {1.0, 4.0, 8.0, 16.0, 12.5, 64.0}) {
    CommModel m = base;
    m.bits = q;
    const CommEstimate e = estimate_communication(m);
    expect_rel(e.dc_bytes, q / 32 * e32.dc_bytes);
    expect_rel(e.fl_bytes, q / 32 * e32.fl_bytes);
    expect_rel(e.uplink_bytes, q / 32 * e32.uplink_bytes);
    expect_rel(e.anchor_distribution_bytes, q / 32 * e32.anchor_distribution_bytes);
    expect_rel(e.break_even_rounds, e32.break_even_rounds);
  }
}

TEST(Comm, BreakEvenExceedsHalfOverP) {
  // The downlink carries the whole model, so B_DC > c N q / 8 = B_FL(R = 1/(2p)) as soon as
  // anything else is sent; with nothing else R* is exactly 1/(2p).
  for (double p : {0.05, 0.25, 0.6, 1.0})
    for (double N : {1.0, 1e3, 1e9})
      for (std::int64_t l : {1, 10})
        for (double gamma : {0.0, 100.0}) {
          CommModel m;
          m.participation = p;
          m.model_parameters = N;
          m.dim = l;
          m.gamma = gamma;
          m.mean_samples = 0;
          EXPECT_GT(break_even_rounds(m), 1 / (2 * p)) << p << " " << N << " " << l;
        }
  CommModel bare;
  bare.mean_samples = 0;
  bare.anchor_rows = 0;
  bare.dim = 0;
  bare.participation = 0.25;
  EXPECT_DOUBLE_EQ(break_even_rounds(bare), 2.0);
}

// An MNIST layout with one MLP (hidden layer of 256 units) per protocol: DC's h on l = 30 aligned
// features has N_DC = 30*256 + 256 + 256*10 + 10 = 10,506 parameters, FedAvg's on the m = 784
// raw features N_FL = 784*256 + 256 + 2570 = 203,530. c = 10 users of n = 1000, a = 1000, q = 32
// (4 bytes), a seeded anchor (gamma = 0), p = 1.
CommModel mnist_layout() {
  CommModel m;
  m.users = 10;
  m.mean_samples = 1000;
  m.anchor_rows = 1000;
  m.features = 784;
  m.dim = 30;
  m.gamma = 0;
  m.dc_model_parameters = 10506;
  m.fl_model_parameters = 203530;
  return m;
}

TEST(Comm, PerProtocolModelSizes) {
  const CommEstimate e = estimate_communication(mnist_layout());
  EXPECT_EQ(e.dc_model_parameters, 10506.0);
  EXPECT_EQ(e.fl_model_parameters, 203530.0);
  expect_rel(e.uplink_bytes, 2400000.0);              // 10 (1000 + 1000) 30 * 4
  expect_rel(e.downlink_bytes_per_user, 45624.0);     // (30^2 + 10506) * 4: DC's model
  expect_rel(e.downlink_bytes, 456240.0);             // 10 users
  expect_rel(e.dc_bytes, 2856240.0);                  // no anchor transfer
  expect_rel(e.fl_bytes_per_round, 16282400.0);       // 2 * 1 * 10 * 203530 * 4: FedAvg's model
  expect_rel(e.break_even_rounds, 35703.0 / 203530);  // 2856240 / 16282400 = 0.17542
  EXPECT_EQ(e.break_even_rounds_ceil, 1.0);
  // The same layout with FedAvg's N for both (the one-N reading) overstates B_DC 3.7-fold:
  // downlink 10 (900 + 203530) 4 = 8177200, B_DC = 10577200, R* = 0.64961.
  CommModel one_n = mnist_layout();
  one_n.dc_model_parameters.reset();
  one_n.fl_model_parameters.reset();
  one_n.model_parameters = 203530;
  const CommEstimate o = estimate_communication(one_n);
  expect_rel(o.dc_bytes, 10577200.0);
  expect_rel(o.break_even_rounds, 10577200.0 / 16282400);
  expect_rel(o.fl_bytes, e.fl_bytes);
  EXPECT_EQ(o.dc_model_parameters, 203530.0);
}

TEST(Comm, BreakEvenWithTwoModelSizes) {
  // R* = ((n + a) l + l^2 + N_DC) / (2p N_FL) + gamma a m / (2pc N_FL), worked by hand:
  // gamma = c = 10, p = 0.5: (60000 + 900 + 10506 + 784000) / 203530 = 855406 / 203530.
  CommModel m = mnist_layout();
  m.gamma = 10;
  m.participation = 0.5;
  expect_rel(break_even_rounds(m), 855406.0 / 203530);  // 4.2028
  const CommEstimate e = estimate_communication(m);
  expect_rel(e.dc_bytes, 2856240.0 + 31360000.0);  // + 10 copies of 1000 * 784 * 4
  EXPECT_EQ(e.break_even_rounds_ceil, 5.0);
  // B_FL(R*) = B_DC, and whole rounds cross over at ceil(R*), for several pairs of sizes.
  for (double n_dc : {1.0, 1e3, 1e7})
    for (double n_fl : {1.0, 5e4, 1e9}) {
      m.dc_model_parameters = n_dc;
      m.fl_model_parameters = n_fl;
      m.rounds = break_even_rounds(m);
      const CommEstimate at = estimate_communication(m);
      expect_rel(at.fl_bytes, at.dc_bytes, 1e-13);
      m.rounds = std::ceil(at.break_even_rounds);
      EXPECT_TRUE(estimate_communication(m).dc_sends_less) << n_dc << " " << n_fl;
      m.rounds = std::ceil(at.break_even_rounds) - 1;
      EXPECT_FALSE(estimate_communication(m).dc_sends_less) << n_dc << " " << n_fl;
      // The downlink carries DC's model: R* > N_DC / (2p N_FL) (1/(2p) with one N).
      EXPECT_GT(at.break_even_rounds, n_dc / (2 * 0.5 * n_fl));
    }
}

TEST(Comm, ModelParametersIsBothUnlessOverridden) {
  CommModel base;
  base.model_parameters = 5e6;
  base.participation = 0.3;
  base.rounds = 4;
  const CommEstimate one = estimate_communication(base);
  EXPECT_EQ(one.dc_model_parameters, 5e6);
  EXPECT_EQ(one.fl_model_parameters, 5e6);
  // Overrides equal to N change nothing.
  CommModel same = base;
  same.dc_model_parameters = 5e6;
  same.fl_model_parameters = 5e6;
  const CommEstimate s = estimate_communication(same);
  EXPECT_EQ(s.dc_bytes, one.dc_bytes);
  EXPECT_EQ(s.fl_bytes, one.fl_bytes);
  EXPECT_EQ(s.break_even_rounds, one.break_even_rounds);
  // One override: the other protocol keeps N.
  CommModel dc_only = base;
  dc_only.dc_model_parameters = 1e4;
  const CommEstimate d = estimate_communication(dc_only);
  EXPECT_EQ(d.fl_model_parameters, 5e6);
  expect_rel(d.fl_bytes, one.fl_bytes);
  expect_rel(d.downlink_bytes_per_user, (100.0 * 100 + 1e4) * 4);
  CommModel fl_only = base;
  fl_only.fl_model_parameters = 2e7;
  const CommEstimate f = estimate_communication(fl_only);
  EXPECT_EQ(f.dc_model_parameters, 5e6);
  expect_rel(f.dc_bytes, one.dc_bytes);
  expect_rel(f.fl_bytes, 4 * one.fl_bytes);  // 4x the model, 4x the bytes
  expect_rel(f.break_even_rounds, one.break_even_rounds / 4);
  // Transfer times: a DC client downloads N_DC, an FL client moves N_FL both ways per round.
  const TransferTimes t = estimate_transfer_times(fl_only, 1e9, 0);
  expect_rel(t.fl_client_seconds, 8 * (4 * 2 * 2e7 * 4) / 1e9);
  expect_rel(t.dc_client_seconds, 8 * (3136000.0 + 800000.0 + (1e4 + 5e6) * 4) / 1e9);
}

TEST(Comm, JsonReportsBothModelSizes) {
  const CommModel two = mnist_layout();
  auto j = nlohmann::json::parse(communication_json(two, estimate_communication(two), {}, 0, 0));
  EXPECT_EQ(j["inputs"]["dc_model_parameters"].get<double>(), 10506.0);
  EXPECT_EQ(j["inputs"]["fl_model_parameters"].get<double>(), 203530.0);
  EXPECT_TRUE(j["inputs"]["model_parameters"].is_null());  // no one N when they differ
  EXPECT_EQ(j["bytes"]["downlink"].get<double>(), 456240.0);
  const CommModel one;
  j = nlohmann::json::parse(communication_json(one, estimate_communication(one), {}, 0, 0));
  EXPECT_EQ(j["inputs"]["model_parameters"].get<double>(), 2.5e7);
  EXPECT_EQ(j["inputs"]["dc_model_parameters"].get<double>(), 2.5e7);
  EXPECT_EQ(j["inputs"]["fl_model_parameters"].get<double>(), 2.5e7);
}

TEST(Comm, PerUserSamples) {
  CommModel m;
  m.users = 4;
  m.samples = {500, 1500, 1000, 3000};  // mean 1500, largest 3000
  const CommEstimate e = estimate_communication(m);
  EXPECT_EQ(e.mean_samples, 1500.0);
  EXPECT_EQ(e.gamma, 4.0);
  // sum_i (n_i + a) l q / 8 = (6000 + 4 * 1000) * 100 * 4.
  expect_rel(e.uplink_bytes, 4000000.0);
  expect_rel(e.uplink_bytes_per_user, 1000000.0);  // (1500 + 1000) * 100 * 4
  expect_rel(e.uplink_bytes_max_user, 1600000.0);  // (3000 + 1000) * 100 * 4
  // + 4 * 100040000 downlink + 4 * 3136000 anchor.
  expect_rel(e.dc_bytes, 4000000.0 + 400160000.0 + 12544000.0);
  // Eq. (14) with the mean gives the same total, and eq. (16) uses the mean.
  CommModel mean = m;
  mean.samples.clear();
  mean.mean_samples = 1500;
  expect_rel(estimate_communication(mean).dc_bytes, e.dc_bytes);
  expect_rel(e.break_even_rounds, e.dc_bytes / (2 * 4 * 2.5e7 * 4));
}

TEST(Comm, EquationFunctions) {
  expect_rel(dc_uplink_bytes(1000, 1000, 100, 32), 800000.0);
  expect_rel(dc_uplink_bytes(2.5, 0, 3, 8), 7.5);  // fractional n and q/8 = 1
  expect_rel(dc_downlink_bytes(100, 2.5e7, 32), 100040000.0);
  expect_rel(anchor_bytes(1000, 784, 32), 3136000.0);
  expect_rel(anchor_bytes(3, 5, 4), 7.5);  // 4-bit scalars: half a byte each
  expect_rel(anchor_distribution_bytes(100, 1000, 784, 32), 313600000.0);
  EXPECT_EQ(anchor_distribution_bytes(0, 1000, 784, 32), 0.0);
  expect_rel(fl_bytes(24, 0.5, 10, 1e6, 32), 2 * 24 * 0.5 * 10 * 1e6 * 4);
  EXPECT_EQ(fl_bytes(0, 1, 10, 1e6, 32), 0.0);
  // Counts past 2^63 are fine in double: 2 * 1e6 * 1 * 1e6 * 1e9 * 4 = 8e21 bytes.
  expect_rel(fl_bytes(1e6, 1, 1000000, 1e9, 32), 8e21);
}

TEST(Comm, TransferTimes) {
  // beta = 1 Gbit/s, tau = 50 ms.
  const TransferTimes t = estimate_transfer_times(CommModel{}, 1e9, 0.05);
  expect_rel(t.dc_seconds, 8 * 1.03976e10 / 1e9 + 3 * 0.05);  // 83.3308 s
  expect_rel(t.fl_seconds, 8 * 2.0e10 / 1e9 + 2 * 0.05);      // 160.1 s
  // Busiest client: one anchor copy + its upload + its download, 3136000 + 800000 + 100040000.
  expect_rel(t.dc_client_seconds, 8 * 103976000.0 / 1e9 + 0.15);
  // An FL client moves the model both ways each round: 2 * 2.5e7 * 4 bytes.
  expect_rel(t.fl_client_seconds, 8 * 2e8 / 1e9 + 0.1);
  CommModel m;
  m.rounds = 3;
  m.participation = 0.5;
  const TransferTimes t3 = estimate_transfer_times(m, 1e8, 0.2);
  expect_rel(t3.fl_seconds, 8 * (3 * 0.5 * 2.0e10) / 1e8 + 6 * 0.2);
  expect_rel(t3.fl_client_seconds, 8 * (3 * 2e8) / 1e8 + 6 * 0.2);  // p does not enter
  expect_rel(t3.dc_seconds, 8 * 1.03976e10 / 1e8 + 0.6);            // R does not enter
  EXPECT_EQ(dc_transfer_seconds(0, 1, 2), 6.0);
  EXPECT_EQ(fl_transfer_seconds(1, 4, 8, 0.5), 5.0);  // 8 / 8 + 2 * 4 * 0.5
}

TEST(Comm, Units) {
  EXPECT_EQ(kKB, 1000.0);
  EXPECT_EQ(kMB, 1000000.0);
  EXPECT_EQ(kKiB, 1024.0);
  EXPECT_EQ(kMiB, 1048576.0);
  EXPECT_EQ(kGiB, 1073741824.0);
  expect_rel(to_gb(1.03976e10), 10.3976);
  EXPECT_EQ(to_gib(1073741824.0), 1.0);
  expect_rel(to_gib(2.0e10), 2.0e10 / 1073741824.0);  // 18.6265 GiB against 20 GB
  EXPECT_LT(to_gib(2.0e10), to_gb(2.0e10));
}

void expect_invalid(const std::function<void()>& f, const std::string& name,
                    const std::string& expected) {
  try {
    f();
    ADD_FAILURE() << "no InvalidInput for " << name;
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  }
}

TEST(Comm, BadModelsThrowNamingTheParameter) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::function<void(CommModel&)> set;
    std::string name, expected;
  } cases[] = {
      {[](CommModel& m) { m.participation = 0; }, "participation p", "0 < p <= 1"},
      {[](CommModel& m) { m.participation = 1.5; }, "participation p", "0 < p <= 1"},
      {[&](CommModel& m) { m.participation = nan; }, "participation p", "0 < p <= 1"},
      {[](CommModel& m) { m.bits = 0; }, "bits q", "> 0"},
      {[](CommModel& m) { m.bits = -16; }, "bits q", "> 0"},
      {[&](CommModel& m) { m.bits = inf; }, "bits q", "finite"},
      {[](CommModel& m) { m.users = 0; }, "users c", ">= 1"},
      {[](CommModel& m) { m.anchor_rows = -1; }, "anchor_rows a", ">= 0"},
      {[](CommModel& m) { m.features = -784; }, "features m", ">= 0"},
      {[](CommModel& m) { m.dim = -1; }, "dim l", ">= 0"},
      {[](CommModel& m) { m.mean_samples = -1; }, "mean_samples n", ">= 0"},
      {[&](CommModel& m) { m.mean_samples = nan; }, "mean_samples n", "finite"},
      {[](CommModel& m) {
         m.samples = {1, 2};
       },
       "samples has 2 entries", "users c = 100"},
      {[](CommModel& m) {
         m.users = 3;
         m.samples = {1, -2, 3};
       },
       "samples n_2", ">= 0"},
      {[](CommModel& m) { m.gamma = -1; }, "gamma", ">= 0"},
      {[&](CommModel& m) { m.gamma = inf; }, "gamma", "finite"},
      {[](CommModel& m) { m.model_parameters = 0.5; }, "model_parameters N", ">= 1"},
      {[&](CommModel& m) { m.model_parameters = inf; }, "model_parameters N", "finite"},
      {[](CommModel& m) { m.dc_model_parameters = 0.5; }, "dc_model_parameters N_DC", ">= 1"},
      {[&](CommModel& m) { m.dc_model_parameters = nan; }, "dc_model_parameters N_DC", "finite"},
      {[](CommModel& m) { m.fl_model_parameters = 0; }, "fl_model_parameters N_FL", ">= 1"},
      {[&](CommModel& m) { m.fl_model_parameters = -inf; }, "fl_model_parameters N_FL", "finite"},
      // A bad common N is refused even where both protocols override it.
      {[](CommModel& m) {
         m.model_parameters = 0;
         m.dc_model_parameters = 10;
         m.fl_model_parameters = 10;
       },
       "model_parameters N", ">= 1"},
      {[](CommModel& m) { m.rounds = -1; }, "rounds R", ">= 0"},
      {[&](CommModel& m) { m.rounds = nan; }, "rounds R", "finite"},
      // Valid values whose byte counts leave the range of double.
      {[](CommModel& m) {
         m.model_parameters = 1e300;
         m.rounds = 1e10;
       },
       "2 R p c N_FL q / 8", "overflows"},
      {[](CommModel& m) {
         m.mean_samples = 1e300;
         m.dim = 1000000000;
       },
       "(n_i + a) l q / 8", "overflows"},
  };
  for (const Case& k : cases) {
    CommModel m;
    k.set(m);
    // An overflow is a property of the whole computation, not of one parameter.
    if (k.expected == "overflows")
      EXPECT_NO_THROW(validate(m));
    else
      expect_invalid([&] { validate(m); }, k.name, k.expected);
    expect_invalid([&] { (void)estimate_communication(m); }, k.name, k.expected);
    expect_invalid([&] { (void)estimate_transfer_times(m, 1e9, 0.01); }, k.name, k.expected);
  }
}

TEST(Comm, BadArgumentsOfTheEquationsThrow) {
  const double inf = std::numeric_limits<double>::infinity();
  expect_invalid([] { dc_uplink_bytes(-1, 10, 10, 32); }, "samples n_i", ">= 0");
  expect_invalid([] { dc_uplink_bytes(1, -10, 10, 32); }, "anchor_rows a", ">= 0");
  expect_invalid([] { dc_downlink_bytes(10, 0, 32); }, "model_parameters N", ">= 1");
  expect_invalid([] { anchor_bytes(10, 10, 0); }, "bits q", "> 0");
  expect_invalid([] { anchor_distribution_bytes(-0.5, 10, 10, 32); }, "gamma", ">= 0");
  expect_invalid([] { fl_bytes(1, 0, 10, 1e6, 32); }, "participation p", "0 < p <= 1");
  expect_invalid([] { fl_bytes(1, 1, 0, 1e6, 32); }, "users c", ">= 1");
  expect_invalid([] { fl_bytes(-1, 1, 1, 1e6, 32); }, "rounds R", ">= 0");
  expect_invalid([] { (void)estimate_transfer_times(CommModel{}, 0, 0.1); }, "bandwidth beta",
                 "> 0");
  expect_invalid([&] { (void)estimate_transfer_times(CommModel{}, inf, 0.1); }, "bandwidth beta",
                 "finite");
  expect_invalid([] { (void)estimate_transfer_times(CommModel{}, 1e9, -0.1); }, "rtt tau", ">= 0");
  expect_invalid([] { (void)dc_transfer_seconds(1, -1, 0); }, "bandwidth beta", "> 0");
  expect_invalid([] { (void)fl_transfer_seconds(1, -2, 1, 0); }, "rounds R", ">= 0");
  // 8 B / beta overflows for a denormal goodput.
  expect_invalid([] { (void)dc_transfer_seconds(1e10, 1e-310, 0); }, "transfer time", "overflows");
}

}  // namespace
}  // namespace dcalign
