#pragma once
// The whole Data Collaboration protocol (paper 001, Algorithm 1 and section 7) as a repeatable
// experiment: dataset, user partition, secret bases under a condition of eq. 92, released
// representations, alignment, downstream model on the stacked aligned data, evaluation on the
// users' test data mapped with their own F_i G_i (eq. 9); Central and Local baselines; trials
// with mean and 95% confidence intervals. protocol = "nri-dc" runs paper 004's Algorithm 1
// instead (src/experiment/nri_dc.hpp): the workers release PCA representations of noisy copies
// of their data, the master returns only labels of the anchor, and each worker trains its own
// model on the anchor and those labels.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dcalign/learn.hpp"
#include "dcalign/user.hpp"

namespace dcalign::experiment {

/// One key of a [sweep] section and its values, in the file's order, as text (a number's
/// decimal form, or the string).
struct SweepAxis {
  std::string key;  ///< anchor_rows, anchor, dim, users, samples_per_user, test_samples, dp_epsilon
  std::vector<std::string> values;
};

/// A test of the [[statistics]] section, run on the records once every sweep point has run.
///  - "paired-t": method a against method b (a - b), paired by trial, per sweep point,
///    condition, model and metric (a baseline, "central" or "local", pairs with every
///    condition); stats::paired_t_test with `alternative` about mean(a - b); effect: d_z.
///  - "anova1": one-way ANOVA across the levels of factors[0] (a swept key, "method" or
///    "condition"), per combination of everything else; effect: Cohen's f.
///  - "anova2": two-way ANOVA with interaction over factors[0] x factors[1], type II or III sums
///    of squares (`sum_of_squares`); one row per term; effect: the partial-eta-squared f.
/// ANOVAs over "method" or "condition" take the alignment methods only.
struct StatisticsSpec {
  std::string test;
  std::string a, b;
  std::string alternative = "two-sided";  ///< "two-sided", "less" or "greater"
  std::vector<std::string> factors;
  std::string sum_of_squares = "type2";  ///< "type2" or "type3"
};

/// One test result. The group fields hold "*" where the test runs across them.
struct StatisticsResult {
  std::string test;  ///< as in the spec
  std::string what;  ///< "odc:haar - odc:identity", "anchor_rows", "anchor x anchor_rows"
  std::string term;  ///< anova2: the first factor, the second, or "a:b"; else ""
  std::string point, condition, method, model, metric;
  index_t n = 0;            ///< pairs or observations
  double statistic = 0;     ///< t or F
  double df1 = 0, df2 = 0;  ///< t: df in df1; F: (effect, error)
  double p = 1;
  double effect = 0;              ///< d_z or Cohen's f
  double mean_a = 0, mean_b = 0;  ///< paired-t: the two means
};

struct Config {
  std::string name = "experiment";
  /// "dc" (paper 001, Algorithm 1) or "nri-dc" (paper 004, Algorithm 1 with section 4.1's
  /// experiment: hard anchor labels returned to the workers, ROC-AUC averaged over workers).
  std::string protocol = "dc";
  std::string source;    ///< the TOML file it was read from (for the record)
  std::string dataset;   ///< a name from data::dataset_names()
  std::string data_dir;  ///< empty: $DCALIGN_DATA, else the compiled default
  /// Check every dataset file against the official file's SHA-256 (data::LoadOptions).
  bool verify_checksums = true;
  /// Rows: iid | label-skew | dirichlet. Vertical partitions (paper 001 Table 8; the rows are
  /// iid): the features are split into two complementary blocks of whole attributes
  /// (data::attribute_blocks: the first half of the attributes in column order, and the rest)
  /// and users 1..c/2 hold the first block, users c/2+1..c the second (c even):
  ///  - "vertical": every user holds its own rows (the literal reading of the paper): each
  ///    maps its block with its own F_i and the anchor's columns of that block, and all c users
  ///    are aligned; its test share carries its block only;
  ///  - "vertical-joined": users k and k + c/2 hold the same rows (the construction of Imakura
  ///    et al., PKAW 2020): each maps its block, the pair's representations (data, anchor, test
  ///    rows) are concatenated to 2l columns, and the c/2 pairs are aligned at dimension 2l.
  /// Central uses all features of all rows; Local is each user alone on its block. SameSpan
  /// conditions share the span within a block (the block's first user's). Not with FedAvg or
  /// the privacy measurements, which assume every user holds all features.
  std::string partition = "iid";
  double dirichlet_alpha = 0.5;
  index_t users = 10;              ///< c
  index_t samples_per_user = 100;  ///< n_i
  /// 0: the whole official test set; else a random subset of it. A dataset without an official
  /// test split needs it: every trial then draws its own test set of this size from the data.
  index_t test_samples = 0;
  /// Where the test rows come from for a set with an official split: "official" (the default;
  /// that split, see test_samples) or "pooled" (the official training and test rows form one
  /// pool, data::pool_splits, and every trial draws test_samples rows of it for its test set and
  /// the users from the rest, as for a set without a split; paper 001 section 7 draws the
  /// 10,000 test images of MNIST and Fashion-MNIST at random). "pooled" needs test_samples >= 1
  /// and a set with an official split.
  std::string test_split = "official";
  /// Paper 004's data preparation (section 4.2). subsample > 0: every trial first draws this
  /// many rows of the pool from its own seed, then splits off its test rows and partitions the
  /// users from those rows alone (0: the whole pool, the default). The pool is the dataset's
  /// training rows, after emulate_duplicates.
  index_t subsample = 0;
  /// subsample keeps the class proportions (data::stratified_allocation: largest-remainder
  /// rounding of subsample x class share); false: a uniform draw. Regression sets draw uniformly.
  bool subsample_stratified = true;
  /// One-hot coding of the categorical columns: "full" (one indicator per level) or
  /// "drop-first" (pandas' get_dummies(drop_first=True), as paper 004 codes its datasets).
  std::string onehot = "full";
  /// Standardise the dataset's continuous columns when loading (data::LoadOptions::standardize;
  /// Adult's six numeric columns, Pima's, ...). false: their raw values.
  bool standardize = true;
  /// heart-disease only: ca "continuous" (the loader's default) or "categorical" (one-hot, as
  /// paper 004 section 4.2.2 lists it).
  std::string heart_ca = "continuous";
  /// An EMULATION, 0 = off: the pool becomes this many rows by repeating the dataset's rows in
  /// order (row k of the pool is row k mod n of the n loaded rows; data::repeat_rows), before
  /// subsampling and the per-trial test split, so test rows can have copies among the training
  /// rows. It stands in for the widely circulated 1025-row Heart disease file, which repeats
  /// the Cleveland patients, to show the effect of that duplication on paper 004's numbers.
  /// Needs a dataset without an official test split and at least its n rows.
  index_t emulate_duplicates = 0;
  index_t anchor_rows = 1000;      ///< a
  std::string anchor = "uniform";  ///< uniform | normal
  index_t dim = 50;                ///< l; 0 means floor(dim_fraction * m)
  double dim_fraction = 0.0;
  /// Users with different latent dimensions (paper 002, eq. 1). Empty (the default): every
  /// user has l = dim. Else the l_i the users may have: under dim_assignment = "draw" each user
  /// draws its l_i uniformly from these values, per trial, from the trial's data seed; under
  /// "in-order" the list has one value per user and user i has the i-th. `dim` is then the
  /// common dimension of the aligned space (G_i is l_i x dim; dcalign::align_ragged), at most
  /// anchor_rows and users x the smallest value. Only Imakura-DC and Kawakami-DC align users
  /// of different l_i (ODC, GOPP, OPP and RDP need one l), with protocol "dc", a horizontal
  /// partition and no privacy measurements. Under the SameSpan conditions user i's span is
  /// that of user 1's top l_i right singular vectors, so the spans are nested.
  std::vector<index_t> dim_per_user;
  std::string dim_assignment = "draw";
  /// PCA (centred) instead of plain SVD for V_i. Unset: the protocol's default, false for "dc"
  /// and true for "nri-dc" (scikit-learn's PCA, which subtracts the mean it was fitted on).
  std::optional<bool> center;
  bool centered() const {
    return center.value_or(protocol == "nri-dc");
  }  /// ODC's target rotation O in A_1 O: "haar" (a fresh random one per trial) or "identity".
  std::string odc_rotation = "haar";
  /// Imakura-DC's right factor R in Z = U R: "identity" or "uniform" (a random invertible one).
  std::string imakura_right = "identity";
  /// Who holds the test set: "own" (each user its share, mapped with F_i G_i, paper eq. 9),
  /// "first" (user 1 holds all of it and maps it with F_1 G_1; Local scores user 1 alone) or,
  /// for "nri-dc" only, "shared" (every worker holds the same test set, paper 004 section 4.1).
  /// Unset: "own" for "dc", "shared" for "nri-dc".
  std::optional<std::string> test_holder;
  std::string holder() const {
    return test_holder.value_or(protocol == "nri-dc" ? "shared" : "own");
  }
  /// NRI-DC: each worker's PCA is fitted on X_i + delta E_i, E_i standard normal (004 sec. 4.1).
  double nri_delta = 0.05;
  /// NRI-DC: each worker shuffles the rows of (X_i, Y_i) before release (004 Alg. 1 step 2).
  bool nri_permute = true;
  /// Differential privacy, protocol "dc" only (include/dcalign/privacy.hpp; Analytic Gaussian
  /// Mechanism of Balle and Wang 2018, paper 000 Algorithm 3), at (dp_epsilon, dp_delta):
  ///  - "none": off (the default).
  ///  - "released" (paper 000, eq. 3): every user releases X~_i = X_i F_i + sigma_i W_i, W_i
  ///    entrywise N(0, 1), and the anchor representation A F_i without noise (000 eq. 6). The
  ///    sensitivity is 000's eq. 4, Delta_i = r ||F_i||_2: r for orthonormal F_i (the -Orth
  ///    conditions), the spectral norm of F_i otherwise. Central and Local use the raw data, as
  ///    000's baselines do; the test data are mapped without noise.
  ///  - "raw" (paper 001's DP baseline, section 7.1): every user's training rows become
  ///    X_i + sigma W_i (Delta = r) before anything else, so Central on them is 001's DP baseline
  ///    and every other method is post-processing of the noisy rows.
  /// The W_i come from the trial's seed (derive(seed, 41 or 43, 4096 trial + user)); in "released"
  /// every condition of a trial uses the same W_i. 000 does not say what "the range r" of its
  /// eq. 4 is: r (dp_row_range) is taken as the largest L2 distance between two rows of a
  /// user's data, so that Delta = r ||F||_2 bounds the change of one released row. The default
  /// r = 1 is 000's reading (its Delta <= r with results near Central at epsilon = 8 need Delta
  /// of order 1); it is a guarantee only for rows within L2 distance 1 of each other. Rows in
  /// [0, 1]^m can be sqrt(m) apart (28 for MNIST): set dp_row_range = 28 for a worst-case bound.
  /// Caveat: 000's guarantee treats F_i as fixed, but F_i is computed from user data (user 1's
  /// SVD under SameSpan); "raw" has no such gap.
  std::string dp_target = "none";
  double dp_epsilon = 8;    ///< > 0 (000's default)
  double dp_delta = 1e-3;   ///< in (0, 1) (000 and 001 fix 1e-3)
  double dp_row_range = 1;  ///< r > 0
  bool dp_enabled() const { return dp_target != "none"; }
  /// Privacy measurements (include/dcalign/privacy_attacks.hpp), protocols "dc" and "nri-dc";
  /// empty (the default) or absent: none. Per trial and condition ("-" for "nri-dc"), records
  /// with method "privacy", model "-":
  ///  - "collusion": user 1 colludes with the analyst and attacks every other user j: F^_j =
  ///    A^+ A_j, X^_j = X~_j F^_j^+ (paper 001 section 2.2), from what j released (with its DP
  ///    noise under dp_target = "released"). Metrics collusion_error, the median over j of
  ///    ||X^_j - X_j||_F / ||X_j||_F, and collusion_row_error, the median over j of the median
  ///    per-row error ||x^ - x|| / ||x||; X_j are the rows j released (all its training rows, or
  ///    those kept by privacy_defence), before any "raw" noise. Needs users >= 2. Under
  ///    "nri-dc", worker 1 and the master attack what the workers release, (A - 1 mu_j) F_j and
  ///    P_j (X_j - 1 mu_j) F_j: with center (the default) by the affine attack
  ///    (ReleaseMap::affine: [F^_j; b^_j] = [A, 1]^+ A~_j, X^_j = (X~_j - 1 b^_j) F^_j^+, exact
  ///    at l = m when anchor_rows >= m + 1), else by the linear one; the errors compare with the
  ///    true rows in the released order (the evaluator knows P_j), and collusion_identified is
  ///    the median over j of the share of reconstructed rows whose nearest true row of X_j is the
  ///    right one (match_rows: the attacker's own ability to undo P_j).
  ///  - "dr": the epsilon-DR ratio r(x) = ||x - x F_i F_i^+|| / ||x|| of paper 004 eq. (3) of
  ///    every user's training rows under its own secret basis ("nri-dc": its PCA basis F'_i, on
  ///    the raw rows, not the centred ones: the ratio the affine attacker's per-row error
  ///    equals). Metrics dr_fraction_below (mean over users of the share of rows with
  ///    r < privacy_dr_epsilon: what the down-sampling defence drops), dr_min_ratio (min over
  ///    all rows: the largest epsilon every F_i satisfies) and dr_median_ratio (median over
  ///    users of the median ratio). All on every training row, before the defence.
  std::vector<std::string> privacy;
  /// The down-sampling threshold of "dr", in (0, 1] (r is in [0, 1]). The papers give no value;
  /// 0.1 keeps rows of which at least 10% lies outside span(F_i).
  double privacy_dr_epsilon = 0.1;
  /// The down-sampling defence applied inside the protocol (paper 004 section 2.3; needs "dr" in
  /// privacy): after choosing its basis and before releasing, each user drops its training rows
  /// (and their labels) with r(x) < privacy_dr_epsilon under its own F_i, computed on the rows
  /// it projects (under dp_target = "raw" the noisy ones; "nri-dc": the raw rows with F'_i,
  /// whose PCA and mean stay those of all rows), and the DC methods train on the rows kept.
  /// Central and Local keep every row (the defence protects releases, which they do not make).
  /// A user that would drop every row is an error naming it (nothing left to train on), not a
  /// user left out. Records dr_dropped_rows (rows dropped over all users) and
  /// dr_dropped_fraction (that over all users' training rows) per trial and condition.
  bool privacy_defence = false;
  bool measures(const std::string& what) const {
    return std::find(privacy.begin(), privacy.end(), what) != privacy.end();
  }
  /// Secret-basis conditions of the "dc" protocol ("nri-dc" has none: PCA per worker).
  std::vector<SpanCondition> conditions = {SpanCondition::same_span_orth};
  /// Alignment methods (odc, imakura, kawakami, gopp, opp, rdp-ls, rdp-opp) and baselines
  /// (central, local).
  std::vector<std::string> methods = {"central", "local", "imakura", "kawakami", "odc"};
  /// RDP's relative penalty weight (AlignOptions::rdp_eta) and GOPP's stopping tolerance
  /// (AlignOptions::gopp_tolerance); unset: the library's defaults.
  std::optional<double> rdp_eta, gopp_tolerance;
  /// "all": every trial draws its own split, secret bases, anchor, noise and model seeds;
  /// "alignment": every trial reuses trial 1's, and only the alignment's random factors (ODC's O,
  /// Imakura-DC's R, sketches) are drawn anew: paper 001 section 8's design, in which the
  /// identity variants are the same in every trial. Methods may name the variant of their
  /// random factor, "odc:haar", "odc:identity", "imakura:identity", "imakura:uniform"
  /// (overriding odc_rotation / imakura_right), so that one config compares both, paired by
  /// trial.
  std::string redraw = "all";
  /// Analyst-side standardisation of the aligned representation: each column's mean
  /// and standard deviation from the stacked aligned training data, applied to it and to every
  /// user's mapped test rows. Imakura-DC's and Kawakami-DC's aligned features are small (RMS
  /// 0.04-0.13 on MNIST) where ODC's are of the data's scale.
  bool standardize_aligned = false;
  /// Protocol "dc": also record the analyst's alignment time per trial, condition and method
  /// (metric "align_seconds", model "-"); "nri-dc" always records it. Off by default: a
  /// wall-clock time is the one record that differs between runs of the same seed.
  bool align_timing = false;
  /// Protocol "dc": the number format of the users' uplink of X~_i and A_i (dcalign::Uplink:
  /// "fp64", the default, "fp32", "fp16" or "int8" with a scale per column); the analyst aligns
  /// and trains on the dequantised values (paper 001 Table 20, "Numerics"). Other than fp64,
  /// every alignment also records its orthogonality error and objective (metrics
  /// "orthogonality_error" and "objective", model "-"), and the traffic counts q bits per value.
  std::string uplink = "fp64";
  /// Kawakami-DC's form: "qr-svd" (paper 001 Alg. 3) or "eigen" (the GEP of 004 eqs. 8-15).
  std::string kawakami_form = "qr-svd";
  /// FedAvg (learn::fit_fedavg), method "fedavg" in `methods`, protocol "dc" only: the MLP of
  /// model_options.mlp trained by federated averaging over the users' raw training rows and
  /// scored on the test data as Central is. Read from the file's [fedavg] section. Each
  /// configuration "<E>E<B>B" (paper 002's 1E32B: E = 1 local epoch, batch B = 32) runs as its
  /// own method "fedavg-<E>E<B>B" with fedavg_rounds rounds and participation fraction p.
  std::vector<std::string> fedavg_configurations = {"1E32B"};
  int fedavg_rounds = 24;                     ///< R >= 1
  double fedavg_participation = 1.0;          ///< p in (0, 1]
  std::vector<std::string> models = {"svm"};  ///< svm | mlp | logreg | knn | forest
  /// accuracy | roc_auc | pr_auc | rmse. AUC metrics make the SVM fit probability outputs.
  std::vector<std::string> metrics = {"accuracy"};
  index_t trials = 1;
  std::uint64_t seed = 0;
  std::string device = "cpu";  ///< alignment and LibTorch models
  /// The run's threads in all (0, the default: the hardware threads). They are worker threads
  /// that take the independent trials and models side by side, each task on one thread: the
  /// small models of these experiments got slower with two LibTorch threads than with one
  /// (bench/results/experiments), and a cap never multiplies. The records do not depend on it.
  /// A "cuda" device runs one task at a time.
  int threads = 0;
  learn::ModelOptions model_options;
  /// Factor sweeps ([sweep] in the file): every combination of the axes' values runs as one
  /// point (the config with those values; axes in alphabetical key order, the first varying
  /// slowest), all points with the same seed, so that they share the data draws (common random
  /// numbers); the records carry their point ("anchor=uniform,anchor_rows=196").
  std::vector<SweepAxis> sweep;
  std::vector<StatisticsSpec> statistics;  ///< [[statistics]]
};

/// Reads a TOML experiment file. Unknown keys, wrong types and bad values throw InvalidInput
/// naming the file and the key.
Config load_config(const std::string& path);

/// Why `name` cannot be an experiment's name, or "" if it can. The name becomes the output file
/// names in write_outputs' directory, so it must be a single plain file name: 1 to 128
/// characters from [A-Za-z0-9_+.-], not starting with '.' or '-' (no '/', no "..", no hidden
/// files).
std::string experiment_name_problem(const std::string& name);

/// One number: one trial, condition, method, model and metric. Central and Local do not depend
/// on the condition and are reported with condition "-", as is every record of "nri-dc". An
/// "nri-dc" run also records, per trial, method and model, the metric "constant_workers": the
/// number of workers whose anchor labels held a single class, so that their model t_i is the
/// constant predictor (ROC-AUC 0.5).
struct Record {
  index_t trial = 0;
  std::string condition, method, model, metric;
  double value = 0.0;
  double seconds = 0.0;    ///< training + evaluation time of this model
  std::string point = "";  ///< the sweep point ("key=value,..."), "" without a sweep
};

/// One FedAvg round of one trial: the curves paper 002 plots against rounds. The test value is
/// the config's first metric on the test data as the method's final record scores it.
struct RoundRecord {
  index_t trial = 0;
  std::string method;           ///< "fedavg-<E>E<B>B"
  int round = 0;                ///< 1-based
  double train_loss = 0.0;      ///< n_k-weighted mean of the clients' last local epoch losses
  double train_accuracy = 0.0;  ///< central model on all users' training rows (NaN: regression)
  double test_value = 0.0;
  double downlink_bytes = 0.0, uplink_bytes = 0.0;  ///< counted from the tensors exchanged
};

/// Parses "<E>E<B>B" (E, B positive integers, e.g. "1E32B") into (E, B); throws InvalidInput.
std::pair<int, int> parse_fedavg_configuration(const std::string& name);

struct Result {
  Config config;
  std::vector<Record> records;
  std::vector<RoundRecord> rounds;  ///< FedAvg's per-round curves
  std::vector<StatisticsResult> statistics;
  double wall_seconds = 0.0;
  std::string machine;             ///< CPU model and thread counts
  int workers = 1;                 ///< the worker threads the run used
  std::size_t resumed_trials = 0;  ///< trials read back from a checkpoint
  /// Per method ("central", "odc", "fedavg-1E32B", ...): the seconds its models took to train and
  /// score, summed over trials, conditions and workers (each record's `seconds`, once per fit).
  std::vector<std::pair<std::string, double>> method_seconds;
};

using Progress = std::function<void(const std::string&)>;

/// Where a run stands, after each finished trial.
struct ProgressReport {
  std::size_t done = 0, total = 0;    ///< trials finished (resumed ones included) and in all
  std::size_t resumed = 0;            ///< of `done`, those read back from the checkpoint
  std::size_t point = 0, points = 1;  ///< the finished trial's point (0-based) and the points
  std::string point_label;            ///< "" without a sweep
  std::size_t point_done = 0, point_total = 0;  ///< that point's trials finished and in all
  double elapsed = 0;                           ///< seconds since the run began
  double remaining = 0;  ///< estimated seconds left (from the trials run here, not resumed)
};

/// A duration for people: "4.2 s" below a minute, "3 min 12 s", "2 h 5 min".
std::string format_duration(double seconds);
/// One line for a ProgressReport: "trial 3 of 10 done (point 2 of 3, dim=5: 1 of 4), elapsed
/// 12.0 s, about 28.0 s left".
std::string progress_line(const ProgressReport& report);

/// How run() runs. Independent trials, and every trial's model fits, run side by side on
/// Config::threads worker threads of one thread each (0: the hardware threads); the records come
/// out in the serial run's order and bit for bit its values, whatever the thread count.
struct RunOptions {
  Progress progress;  ///< messages ("loading mnist", ...); called from one thread at a time
  std::function<void(const ProgressReport&)> on_trial;  ///< after each finished trial
  /// A directory for the checkpoint (experiment/checkpoint.hpp): every finished trial's records
  /// are written there at once, atomically, with the fingerprint of the config, the build and
  /// the data, and the directory is removed once the run is complete. "": none.
  std::string checkpoint_dir;
  /// Continue the run checkpoint_dir holds: its trials are read back, not run again. A
  /// checkpoint of another config, build or data is refused, naming the difference.
  bool resume = false;
  /// Without resume, discard the trials of an interrupted run in checkpoint_dir (else refused).
  bool restart = false;
};

/// Validates the configuration against the dataset (every sweep point, before any training),
/// runs it (every point), then the tests of its statistics section.
Result run(const Config& config, const RunOptions& options);

/// The checkpoint directory of experiment `name` in the results directory `out`:
/// OUT/NAME.trials.
std::string checkpoint_directory(const std::string& out, const std::string& name);
/// Removes a complete run's checkpoint (its manifest and trial files, their temporaries, and the
/// directory when nothing else is left in it).
void remove_checkpoint(const std::string& dir);
/// The same with messages alone: `progress` also gets progress_line() after each trial.
Result run(const Config& config, const Progress& progress = {});

/// Everything run() checks before its first trial (the keys, the tests, every sweep point's
/// dataset and sizes), without running one; returns the number of points.
std::size_t check(const Config& config);

/// The sweep's points: one Config per combination of the axes' values (the config itself when it
/// has no sweep), and their labels. Throws InvalidInput for an unknown key or a bad value.
std::vector<std::pair<std::string, Config>> sweep_points(const Config& config);

/// The tests of config.statistics on a run's records. Throws InvalidInput for a spec that does
/// not fit the config (an unknown method or factor) and stats' errors for degenerate groups.
std::vector<StatisticsResult> run_statistics(const Config& config,
                                             const std::vector<Record>& records);

/// The results' directory, checked before the first trial (a long run must not end unable to
/// write): created if missing, writable, and the three result paths of experiment `name`
/// replaceable. Throws IoError with the OS's reason; `what` names the option in the message.
void check_output_directory(const std::string& dir, const std::string& name,
                            const std::string& what);

/// The JSON document of a run (name, source, machine, wall_seconds, config, records and, where
/// the run has them, statistics and rounds): DIR/NAME.json of write_outputs, and what the
/// Python module's run_experiment returns.
std::string result_json(const Result& result);

/// Writes DIR/NAME.json (result_json), DIR/NAME.csv (records) and DIR/NAME.md
/// (summary table in the layout of paper 001 Table 7).
void write_outputs(const Result& result, const std::string& dir);

/// The Markdown summary: mean +- 95% CI half-width (Student t over trials). For "nri-dc", per
/// metric and model the layout of paper 004's tables (rows mean, std, min, 25%, 50%, 75%, max;
/// columns Central, Local and the methods), then the mean +- 95% CI and the constant workers.
std::string summary_table(const Result& result);

/// pandas' DataFrame.describe() of a sample: std with the n - 1 divisor (NaN for one value),
/// quartiles by linear interpolation between order statistics (numpy's default quantile).
struct Description {
  index_t count = 0;
  double mean = 0, std = 0, min = 0, q25 = 0, q50 = 0, q75 = 0, max = 0;
};
Description describe(const std::vector<double>& values);
/// The p-quantile (0 <= p <= 1) of values sorted increasingly: position p (n - 1), linearly
/// interpolated. Throws InvalidInput for an empty sample or p outside [0, 1].
double quantile_sorted(const std::vector<double>& sorted, double p);

}  // namespace dcalign::experiment
