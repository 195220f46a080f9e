// Paper 001's communication model (section 2.3, eqs. 10-18). All byte counts are formed in
// double: gamma a m q / 8 or 2 R p c N q / 8 can exceed 2^63 (and q / 8 need not be integral),
// so int64 arithmetic would overflow where the model is still meaningful; a count that leaves
// the range of double is reported as an overflow instead of printed as inf.
#include "dcalign/comm.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "dcalign/error.hpp"

namespace dcalign {
namespace {

std::string show(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

[[noreturn]] void bad(const std::string& name, const std::string& value,
                      const std::string& expected) {
  throw InvalidInput("comm: " + name + " = " + value + " is out of range: expected " + expected);
}

void check_count(std::int64_t v, std::int64_t lo, const std::string& name) {
  if (v < lo) bad(name, std::to_string(v), "an integer >= " + std::to_string(lo));
}

void check_nonnegative(double v, const std::string& name) {
  if (!std::isfinite(v) || v < 0) bad(name, show(v), "a finite number >= 0");
}

void check_bits(double q) {
  if (!std::isfinite(q) || q <= 0) bad("bits q", show(q), "a finite number > 0");
}

void check_participation(double p) {
  if (!std::isfinite(p) || p <= 0 || p > 1) bad("participation p", show(p), "0 < p <= 1");
}

void check_model_parameters(double n, const std::string& name) {
  if (!std::isfinite(n) || n < 1) bad(name, show(n), "a finite number >= 1");
}

void check_network(double bandwidth, double rtt) {
  if (!std::isfinite(bandwidth) || bandwidth <= 0)
    bad("bandwidth beta (bits/s)", show(bandwidth), "a finite number > 0");
  check_nonnegative(rtt, "rtt tau (s)");
}

// A count computed from valid inputs is non-negative; only its size can be wrong.
double finite(double v, const std::string& what) {
  if (!std::isfinite(v))
    throw InvalidInput("comm: " + what + " overflows a double (the inputs are too large)");
  return v;
}

double mean_samples_of(const CommModel& m) {
  if (m.samples.empty()) return m.mean_samples;
  double sum = 0;
  for (double n : m.samples) sum += n;
  return finite(sum, "the sum of the samples n_i") / static_cast<double>(m.users);
}

double max_samples_of(const CommModel& m) {
  if (m.samples.empty()) return m.mean_samples;
  return *std::max_element(m.samples.begin(), m.samples.end());
}

double gamma_of(const CommModel& m) { return m.gamma ? *m.gamma : static_cast<double>(m.users); }

}  // namespace

void validate(const CommModel& m) {
  check_count(m.users, 1, "users c");
  if (m.samples.empty()) {
    check_nonnegative(m.mean_samples, "mean_samples n");
  } else {
    if (static_cast<std::int64_t>(m.samples.size()) != m.users)
      throw InvalidInput("comm: samples has " + std::to_string(m.samples.size()) +
                         " entries: expected one per user (users c = " + std::to_string(m.users) +
                         ")");
    for (std::size_t i = 0; i < m.samples.size(); ++i)
      check_nonnegative(m.samples[i], "samples n_" + std::to_string(i + 1));
  }
  check_count(m.anchor_rows, 0, "anchor_rows a");
  check_count(m.features, 0, "features m");
  check_count(m.dim, 0, "dim l");
  check_model_parameters(m.model_parameters, "model_parameters N");
  if (m.dc_model_parameters)
    check_model_parameters(*m.dc_model_parameters, "dc_model_parameters N_DC");
  if (m.fl_model_parameters)
    check_model_parameters(*m.fl_model_parameters, "fl_model_parameters N_FL");
  check_bits(m.bits);
  if (m.gamma) check_nonnegative(*m.gamma, "gamma");
  check_participation(m.participation);
  check_nonnegative(m.rounds, "rounds R");
}

double dc_uplink_bytes(double samples, std::int64_t anchor_rows, std::int64_t dim, double bits) {
  check_nonnegative(samples, "samples n_i");
  check_count(anchor_rows, 0, "anchor_rows a");
  check_count(dim, 0, "dim l");
  check_bits(bits);
  return finite((samples + static_cast<double>(anchor_rows)) * static_cast<double>(dim) * bits / 8,
                "uplink bytes (n_i + a) l q / 8");
}

double dc_downlink_bytes(std::int64_t dim, double model_parameters, double bits) {
  check_count(dim, 0, "dim l");
  check_model_parameters(model_parameters, "model_parameters N_DC");
  check_bits(bits);
  const double l = static_cast<double>(dim);
  return finite((l * l + model_parameters) * bits / 8, "downlink bytes (l^2 + N_DC) q / 8");
}

double anchor_bytes(std::int64_t anchor_rows, std::int64_t features, double bits) {
  check_count(anchor_rows, 0, "anchor_rows a");
  check_count(features, 0, "features m");
  check_bits(bits);
  return finite(static_cast<double>(anchor_rows) * static_cast<double>(features) * bits / 8,
                "anchor bytes a m q / 8");
}

double anchor_distribution_bytes(double gamma, std::int64_t anchor_rows, std::int64_t features,
                                 double bits) {
  check_nonnegative(gamma, "gamma");
  return finite(gamma * anchor_bytes(anchor_rows, features, bits),
                "anchor distribution bytes gamma a m q / 8");
}

double fl_bytes(double rounds, double participation, std::int64_t users, double model_parameters,
                double bits) {
  check_nonnegative(rounds, "rounds R");
  check_participation(participation);
  check_count(users, 1, "users c");
  check_model_parameters(model_parameters, "model_parameters N_FL");
  check_bits(bits);
  return finite(
      2 * rounds * participation * static_cast<double>(users) * model_parameters * bits / 8,
      "FL bytes 2 R p c N_FL q / 8");
}

double break_even_rounds(const CommModel& m) {
  validate(m);
  const double n = mean_samples_of(m), a = static_cast<double>(m.anchor_rows),
               l = static_cast<double>(m.dim), c = static_cast<double>(m.users),
               mm = static_cast<double>(m.features), p = m.participation;
  const double n_dc = m.dc_parameters(), n_fl = m.fl_parameters();
  // Eq. (16) term by term, B_DC / B_FL(1): uplink, downlink (DC's model), anchor (one-off,
  // shared by the c users), each over the 2 p N_FL scalars a client moves per FL round.
  const double r = (n + a) * l / (2 * p * n_fl) + (l * l + n_dc) / (2 * p * n_fl) +
                   gamma_of(m) * a * mm / (2 * p * c * n_fl);
  return finite(r, "break-even rounds R*");
}

CommEstimate estimate_communication(const CommModel& m) {
  validate(m);
  CommEstimate e;
  const double c = static_cast<double>(m.users);
  e.mean_samples = mean_samples_of(m);
  e.gamma = gamma_of(m);
  e.dc_model_parameters = m.dc_parameters();
  e.fl_model_parameters = m.fl_parameters();
  e.uplink_bytes_per_user = dc_uplink_bytes(e.mean_samples, m.anchor_rows, m.dim, m.bits);
  e.uplink_bytes_max_user = dc_uplink_bytes(max_samples_of(m), m.anchor_rows, m.dim, m.bits);
  if (m.samples.empty()) {
    e.uplink_bytes = finite(c * e.uplink_bytes_per_user, "uplink bytes sum_i (n_i + a) l q / 8");
  } else {
    double sum = 0;
    for (double n : m.samples) sum += dc_uplink_bytes(n, m.anchor_rows, m.dim, m.bits);
    e.uplink_bytes = finite(sum, "uplink bytes sum_i (n_i + a) l q / 8");
  }
  e.downlink_bytes_per_user = dc_downlink_bytes(m.dim, e.dc_model_parameters, m.bits);
  e.downlink_bytes = finite(c * e.downlink_bytes_per_user, "downlink bytes c (l^2 + N_DC) q / 8");
  e.anchor_bytes = anchor_bytes(m.anchor_rows, m.features, m.bits);
  e.anchor_distribution_bytes =
      anchor_distribution_bytes(e.gamma, m.anchor_rows, m.features, m.bits);
  e.dc_bytes = finite(e.uplink_bytes + e.downlink_bytes + e.anchor_distribution_bytes,
                      "DC bytes B_DC (eq. 14)");
  e.fl_bytes = fl_bytes(m.rounds, m.participation, m.users, e.fl_model_parameters, m.bits);
  e.fl_bytes_per_round = fl_bytes(1, m.participation, m.users, e.fl_model_parameters, m.bits);
  e.break_even_rounds = break_even_rounds(m);
  e.break_even_rounds_ceil = std::ceil(e.break_even_rounds);
  e.dc_sends_less = e.dc_bytes <= e.fl_bytes;
  return e;
}

double dc_transfer_seconds(double bytes, double bandwidth, double rtt) {
  check_nonnegative(bytes, "bytes");
  check_network(bandwidth, rtt);
  return finite(8 * bytes / bandwidth + 3 * rtt, "DC transfer time 8 B / beta + 3 tau");
}

double fl_transfer_seconds(double bytes, double rounds, double bandwidth, double rtt) {
  check_nonnegative(bytes, "bytes");
  check_nonnegative(rounds, "rounds R");
  check_network(bandwidth, rtt);
  return finite(8 * bytes / bandwidth + 2 * rounds * rtt, "FL transfer time 8 B / beta + 2 R tau");
}

TransferTimes estimate_transfer_times(const CommModel& m, double bandwidth, double rtt) {
  check_network(bandwidth, rtt);
  const CommEstimate e = estimate_communication(m);
  TransferTimes t;
  t.dc_seconds = dc_transfer_seconds(e.dc_bytes, bandwidth, rtt);
  t.fl_seconds = fl_transfer_seconds(e.fl_bytes, m.rounds, bandwidth, rtt);
  // Clients as the bottleneck: each phase takes as long as its busiest client.
  const double anchor_share = e.anchor_distribution_bytes / static_cast<double>(m.users);
  t.dc_client_seconds =
      dc_transfer_seconds(finite(anchor_share + e.uplink_bytes_max_user + e.downlink_bytes_per_user,
                                 "DC bytes of the busiest client"),
                          bandwidth, rtt);
  t.fl_client_seconds = fl_transfer_seconds(fl_bytes(m.rounds, 1, 1, e.fl_model_parameters, m.bits),
                                            m.rounds, bandwidth, rtt);
  return t;
}

std::string communication_json(const CommModel& m, const CommEstimate& e,
                               const std::optional<TransferTimes>& t, double bandwidth, double rtt,
                               int indent) {
  nlohmann::ordered_json j;
  auto& in = j["inputs"];
  in["users"] = m.users;
  in["mean_samples"] = e.mean_samples;
  if (!m.samples.empty()) in["samples"] = m.samples;
  in["anchor_rows"] = m.anchor_rows;
  in["features"] = m.features;
  in["dim"] = m.dim;
  // One N for both protocols, or null when they differ; the sizes used in any case.
  if (e.dc_model_parameters == e.fl_model_parameters)
    in["model_parameters"] = e.dc_model_parameters;
  else
    in["model_parameters"] = nullptr;
  in["dc_model_parameters"] = e.dc_model_parameters;
  in["fl_model_parameters"] = e.fl_model_parameters;
  in["bits"] = m.bits;
  in["gamma"] = e.gamma;
  in["participation"] = m.participation;
  in["rounds"] = m.rounds;
  auto& b = j["bytes"];
  b["uplink_per_user"] = e.uplink_bytes_per_user;
  b["uplink_max_user"] = e.uplink_bytes_max_user;
  b["uplink"] = e.uplink_bytes;
  b["downlink_per_user"] = e.downlink_bytes_per_user;
  b["downlink"] = e.downlink_bytes;
  b["anchor"] = e.anchor_bytes;
  b["anchor_distribution"] = e.anchor_distribution_bytes;
  b["dc"] = e.dc_bytes;
  b["fl_per_round"] = e.fl_bytes_per_round;
  b["fl"] = e.fl_bytes;
  j["gb"] = {{"dc", to_gb(e.dc_bytes)}, {"fl", to_gb(e.fl_bytes)}};
  j["gib"] = {{"dc", to_gib(e.dc_bytes)}, {"fl", to_gib(e.fl_bytes)}};
  j["break_even_rounds"] = e.break_even_rounds;
  j["break_even_rounds_ceil"] = e.break_even_rounds_ceil;
  j["dc_sends_less"] = e.dc_sends_less;
  if (t) {
    j["transfer"] = {{"bandwidth_bits_per_second", bandwidth},
                     {"rtt_seconds", rtt},
                     {"dc_seconds", t->dc_seconds},
                     {"fl_seconds", t->fl_seconds},
                     {"dc_client_seconds", t->dc_client_seconds},
                     {"fl_client_seconds", t->fl_client_seconds}};
  } else {
    j["transfer"] = nullptr;
  }
  return j.dump(indent);
}

}  // namespace dcalign
