#pragma once
// Communication model of paper 001, section 2.3 (eqs. 10-18): the bytes that one Data
// Collaboration (DC) run sends (uplink of the released representations, downlink of the model
// and G_i, distribution of the anchor), the bytes of R rounds of federated learning (FL) with
// participation fraction p, the break-even number of rounds R* above which DC sends less, and
// transfer-time estimates for a bottleneck goodput beta and a round-trip time tau.
//
// Byte counts are doubles: products such as gamma a m q / 8 or 2 R p c N q / 8 can exceed 2^63
// for inputs that are still meaningful (q need not make them integral either), so they are
// formed in double and a count that is not finite is reported as an overflow. Every function
// checks its inputs and throws InvalidInput naming the parameter and the expected range.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcalign {

/// The inputs of 001's model. The defaults are the paper's worked example: c = 100 hospitals
/// with n_i = 1000 samples, a = 1000 anchor rows of m = 784 features, l = 100, a ResNet-50
/// (N = 2.5e7 parameters), FP32, unicast anchor distribution (gamma = c), p = 1, R = 1.
///
/// The paper uses one N for both protocols, but DC's downstream model h sees the l aligned
/// features while FL's model sees the m raw ones, so their sizes usually differ (on MNIST, an
/// MLP with one hidden layer of 256 units: N_DC = 10,506 on l = 30, N_FL = 203,530 on m = 784).
/// `model_parameters` is N for both; `dc_model_parameters` (eqs. 11, 14) and `fl_model_parameters`
/// (eq. 15) override it for one protocol each.
struct CommModel {
  std::int64_t users = 100;         ///< c >= 1
  double mean_samples = 1000;       ///< n (mean samples per user) >= 0; unused when `samples`
                                    ///< is given
  std::vector<double> samples;      ///< n_i of each user (size c, each >= 0), or empty
  std::int64_t anchor_rows = 1000;  ///< a >= 0
  std::int64_t features = 784;      ///< m >= 0
  std::int64_t dim = 100;           ///< l >= 0 (latent dimension)
  double model_parameters = 2.5e7;  ///< N >= 1 (parameters of the model, both protocols)
  std::optional<double> dc_model_parameters;  ///< N_DC >= 1 (DC's h); unset: model_parameters
  std::optional<double> fl_model_parameters;  ///< N_FL >= 1 (FL's model); unset: ditto
  double bits = 32;                           ///< q > 0 (bits per scalar)
  std::optional<double> gamma;  ///< anchor replication factor >= 0; unset: c (unicast)
  double participation = 1;     ///< p in (0, 1]
  double rounds = 1;            ///< R >= 0 (FL rounds)

  /// N_DC: `dc_model_parameters` when set, else `model_parameters`.
  double dc_parameters() const { return dc_model_parameters.value_or(model_parameters); }
  /// N_FL: `fl_model_parameters` when set, else `model_parameters`.
  double fl_parameters() const { return fl_model_parameters.value_or(model_parameters); }
};

/// Throws InvalidInput naming the first parameter of `model` that is out of its range.
void validate(const CommModel& model);

/// Eq. (10): bytes user i uploads, (n_i + a) l q / 8.
double dc_uplink_bytes(double samples, std::int64_t anchor_rows, std::int64_t dim, double bits);
/// Eq. (11): bytes each user downloads (the model h and its G_i), (l^2 + N_DC) q / 8.
double dc_downlink_bytes(std::int64_t dim, double model_parameters, double bits);
/// Eq. (12): one copy of the raw anchor, a m q / 8.
double anchor_bytes(std::int64_t anchor_rows, std::int64_t features, double bits);
/// Eq. (13): distributing the anchor, gamma a m q / 8 (one-off; gamma = 0 for a public or
/// seeded anchor).
double anchor_distribution_bytes(double gamma, std::int64_t anchor_rows, std::int64_t features,
                                 double bits);
/// Eq. (15): R rounds of FL in which a fraction p of the c clients each download and upload the
/// whole model once per round, 2 R p c N_FL q / 8.
double fl_bytes(double rounds, double participation, std::int64_t users, double model_parameters,
                double bits);

/// Everything eqs. (10)-(16) give for one CommModel.
struct CommEstimate {
  double mean_samples = 0;               ///< n used (the mean of `samples` when given)
  double gamma = 0;                      ///< gamma used (c when unset)
  double dc_model_parameters = 0;        ///< N_DC used
  double fl_model_parameters = 0;        ///< N_FL used
  double uplink_bytes_per_user = 0;      ///< eq. (10) with n
  double uplink_bytes_max_user = 0;      ///< eq. (10) with max_i n_i
  double uplink_bytes = 0;               ///< sum_i of eq. (10)
  double downlink_bytes_per_user = 0;    ///< eq. (11)
  double downlink_bytes = 0;             ///< c times eq. (11)
  double anchor_bytes = 0;               ///< eq. (12)
  double anchor_distribution_bytes = 0;  ///< eq. (13)
  double dc_bytes = 0;                   ///< eq. (14), B_DC
  double fl_bytes = 0;                   ///< eq. (15), B_FL for `rounds`
  double fl_bytes_per_round = 0;         ///< eq. (15) with R = 1
  double break_even_rounds = 0;          ///< eq. (16), R*
  double break_even_rounds_ceil = 0;     ///< ceil(R*): DC sends less once R >= this
  bool dc_sends_less = false;            ///< B_DC <= B_FL at `rounds`
};

/// Evaluates eqs. (10)-(16). Throws InvalidInput for a bad model or a byte count that overflows
/// a double.
CommEstimate estimate_communication(const CommModel& model);

/// Eq. (16) with a model size per protocol: the FL rounds R* at which B_FL(R*) = B_DC. From
///   B_DC = q/8 [c ((n + a) l + l^2 + N_DC) + gamma a m]  (eq. 14; c n = sum_i n_i)
///   B_FL(R) = R 2 p c N_FL q/8                             (eq. 15)
/// R* = B_DC / (2 p c N_FL q/8)
///    = (n + a) l / (2p N_FL) + (l^2 + N_DC) / (2p N_FL) + gamma a m / (2pc N_FL),
/// which is the paper's eq. (16) when N_DC = N_FL = N. q cancels; R* > N_DC / (2p N_FL) because
/// the downlink carries DC's model (1/(2p) with one N).
double break_even_rounds(const CommModel& model);

/// Eq. (18), transfer times in seconds for a bottleneck goodput `bandwidth` (beta, bits/s) and a
/// round-trip time `rtt` (tau, s).
struct TransferTimes {
  double dc_seconds = 0;         ///< 8 B_DC / beta + 3 tau
  double fl_seconds = 0;         ///< 8 B_FL / beta + 2 R tau
  double dc_client_seconds = 0;  ///< as dc_seconds with the largest per-client bytes of each phase
  double fl_client_seconds = 0;  ///< as fl_seconds with the largest per-client bytes of each round
};

/// The paper's aggregate times, and its variant for clients as the bottleneck, where each phase
/// costs the bytes of the client that sends or receives most in it. For DC that is the anchor
/// share gamma B_A / c (the anchor split evenly over the users: one copy each when gamma = c),
/// the largest upload (max_i n_i + a) l q / 8 and the download (l^2 + N_DC) q / 8; for FL it
/// is 2 N_FL q / 8 per round, whatever p (a selected client moves the whole model both ways).
TransferTimes estimate_transfer_times(const CommModel& model, double bandwidth, double rtt);

/// Eq. (18) alone: 8 bytes / bandwidth + 3 rtt (DC) ...
double dc_transfer_seconds(double bytes, double bandwidth, double rtt);
/// ... and 8 bytes / bandwidth + 2 R rtt (FL).
double fl_transfer_seconds(double bytes, double rounds, double bandwidth, double rtt);

/// The document of `dcalign comm --json` (and of the Python module's communication()): the
/// inputs, the byte counts, GB and GiB, the break-even rounds and, when `transfer` is given, the
/// transfer times for its bandwidth (bits/s) and rtt (s), else "transfer": null. Indented by
/// `indent` spaces. `estimate` and `transfer` are the results for `model`. The inputs give
/// "dc_model_parameters" and "fl_model_parameters" (the sizes used) and "model_parameters":
/// their common value, or null when they differ.
std::string communication_json(const CommModel& model, const CommEstimate& estimate,
                               const std::optional<TransferTimes>& transfer, double bandwidth,
                               double rtt, int indent = 2);

/// Units of 001 Table 1: decimal (KB = 1e3 bytes, ...) and binary (KiB = 2^10 bytes, ...).
inline constexpr double kKB = 1e3, kMB = 1e6, kGB = 1e9;
inline constexpr double kKiB = 1024.0, kMiB = kKiB * 1024.0, kGiB = kMiB * 1024.0;
/// Bytes in decimal gigabytes (the paper's unit for network time) and in binary gibibytes.
inline double to_gb(double bytes) { return bytes / kGB; }
inline double to_gib(double bytes) { return bytes / kGiB; }

}  // namespace dcalign
