// The option schema (dcalign/options.hpp): one row per option. A new option is one row here plus
// its use in the method that reads it; every entry point (src/cli/align_command.cpp, the Python
// module, src/experiment/config.cpp, src/service/spec.cpp, src/core/model_file.cpp) and the
// library's own check (check_align_options) read it from this table.
#include "dcalign/options.hpp"

#include <limits>
#include <stdexcept>
#include <thread>

#include "core/methods.hpp"
#include "core/option_rows.hpp"

namespace dcalign {
namespace {

using core::Row;

// The counts' upper bounds (docs/reference/errors.md, "Every count has a bound"): large enough for
// any real use, small enough that a typo cannot ask for years of work or an allocation that cannot
// succeed.
constexpr std::int64_t kMaxUsers = std::int64_t{1} << 40;
constexpr std::int64_t kMaxOversampling = 10000;
constexpr std::int64_t kMaxPowerIterations = 100;
constexpr std::int64_t kMaxIterations = 1000000;
constexpr std::int64_t kMaxMemory = 1000;

std::int64_t max_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return 4 * (hw == 0 ? std::int64_t{1} : static_cast<std::int64_t>(hw));
}

std::vector<OptionInfo> make_schema() {
  const std::vector<Method> gopp = {Method::gopp};
  const std::vector<Method> rdp = {Method::rdp_ls, Method::rdp_opp};
  const std::vector<Method> target = {Method::odc, Method::gopp};
  // Which methods compute singular vectors and polar factors is the method table's to say.
  std::vector<Method> svd, polar;
  for (const auto& info : core::method_table()) {
    if (info.uses_svd) svd.push_back(info.method);
    if (info.uses_polar) polar.push_back(info.method);
  }
  std::vector<OptionInfo> t;

  t.push_back(Row::unsigned_integer("seed", "--seed", "0", "",
                                    "seed of O (haar), R (uniform) and the randomized SVD's sketch")
                  .keys("", "", "seed")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.seed = std::get<std::uint64_t>(v);
                    r.align.svd.seed = r.align.seed ^ 0x5eedULL;
                  })
                  .load([](const AlignRequest& r) -> OptionValue { return r.align.seed; }));
  t.push_back(Row::integer("reference_user", "--reference-user", 0, kMaxUsers - 1, "0", "",
                           "ODC's reference user r of the target A_r O (0-based)")
                  .for_methods(target)
                  .when("without a given target")
                  .keys("", "reference_user", "reference_user")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.reference_user = std::get<std::int64_t>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::int64_t{r.align.reference_user};
                  }));
  t.push_back(
      Row::choice("target_rotation", "--target-rotation", {"haar", "identity"}, "haar",
                  "ODC's right factor O of the target A_r O (a given O: --rotation)")
          .for_methods(target)
          .when("without a given target or O")
          .keys("odc_rotation", "target_rotation", "rotation")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.align.rotation = parse_target_rotation(std::get<std::string>(v));
          })
          .load([](const AlignRequest& r) -> OptionValue { return to_string(r.align.rotation); }));
  t.push_back(
      Row::choice("right", "--right", {"identity", "uniform"}, "identity",
                  "Imakura-DC's right factor R of the target U R")
          .for_methods({Method::imakura})
          .keys("imakura_right", "right", "right")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.align.right = parse_right_factor(std::get<std::string>(v));
          })
          .load([](const AlignRequest& r) -> OptionValue { return to_string(r.align.right); }));
  t.push_back(Row::choice("svd", "--svd", {"gram", "exact", "randomized"}, "gram",
                          "the top singular vectors' algorithm (gram falls back to exact when "
                          "sigma_1 / sigma_l > 100)")
                  .for_methods(svd)
                  .when("unless gopp_init = odc")
                  .keys("", "svd", "svd.algorithm")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.svd.algorithm = parse_svd_algorithm(std::get<std::string>(v));
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return to_string(r.align.svd.algorithm);
                  }));
  t.push_back(Row::integer("oversampling", "--oversampling", 0, kMaxOversampling, "10", "columns",
                           "the randomized SVD's oversampling")
                  .for_methods(svd)
                  .when("with svd = randomized")
                  .keys("", "oversampling", "svd.oversampling")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.svd.oversampling = std::get<std::int64_t>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::int64_t{r.align.svd.oversampling};
                  }));
  t.push_back(Row::integer("power_iterations", "--power-iterations", 0, kMaxPowerIterations, "2",
                           "", "the randomized SVD's power iterations")
                  .for_methods(svd)
                  .when("with svd = randomized")
                  .keys("", "power_iterations", "svd.power_iterations")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.svd.power_iterations = static_cast<int>(std::get<std::int64_t>(v));
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::int64_t{r.align.svd.power_iterations};
                  }));
  t.push_back(Row::choice("kawakami_form", "--kawakami-form", {"qr-svd", "eigen"}, "qr-svd",
                          "Kawakami-DC's route: QR + SVD (paper 001 Alg. 3) or the generalized "
                          "eigenproblem")
                  .for_methods({Method::kawakami})
                  .keys("kawakami_form", "kawakami_form", "form")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.kawakami_form = parse_kawakami_form(std::get<std::string>(v));
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return to_string(r.align.kawakami_form);
                  }));
  t.push_back(
      Row::choice("polar", "--polar", {"auto", "svd", "iterative"}, "auto",
                  "how the polar factors are taken: one SVD per user, the batched Newton "
                  "iteration, or the measured faster of the two")
          .for_methods(polar)
          .keys("", "polar", "polar")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.align.polar = parse_polar_method(std::get<std::string>(v));
          })
          .load([](const AlignRequest& r) -> OptionValue { return to_string(r.align.polar); }));
  t.push_back(
      Row::choice("gopp_init", "--gopp-init", {"spectral", "odc"}, "spectral",
                  "GOPP's start: Z = U (top singular vectors) or the ODC solution")
          .for_methods(gopp)
          .keys("", "gopp_init", "init")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.align.gopp.init = parse_gopp_init(std::get<std::string>(v));
          })
          .load([](const AlignRequest& r) -> OptionValue { return to_string(r.align.gopp.init); }));
  t.push_back(
      Row::real("gopp_tolerance", "--gopp-tolerance", 0, false, "1e-10", "",
                "GOPP stops when the objective's relative decrease is at most this")
          .for_methods(gopp)
          .keys("gopp_tolerance", "gopp_tolerance", "tolerance")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.align.gopp.tolerance = std::get<double>(v);
          })
          .load([](const AlignRequest& r) -> OptionValue { return r.align.gopp.tolerance; }));
  t.push_back(Row::integer("gopp_max_iterations", "--gopp-max-iterations", 1, kMaxIterations,
                           "1000", "iterations", "GOPP's iteration cap")
                  .for_methods(gopp)
                  .keys("", "gopp_max_iterations", "max_iterations")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.gopp.max_iterations = std::get<std::int64_t>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::int64_t{r.align.gopp.max_iterations};
                  }));
  t.push_back(Row::real("rdp_eta", "--rdp-eta", 0, false, "0.01", "",
                        "RDP's penalty weight, relative to the anchors' energy (1/c) sum_i "
                        "||A_i||_F^2")
                  .for_methods(rdp)
                  .keys("rdp_eta", "rdp_eta", "eta")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.rdp.eta = std::get<double>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue { return r.align.rdp.eta; }));
  t.push_back(Row::real("rdp_gradient_tolerance", "--rdp-gradient-tolerance", 0, false, "1e-06", "",
                        "RDP stops when ||grad f||_F <= this * sum_i ||A_i||_F^2")
                  .for_methods(rdp)
                  .keys("", "rdp_gradient_tolerance", "gradient_tolerance")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.rdp.gradient_tolerance = std::get<double>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return r.align.rdp.gradient_tolerance;
                  }));
  t.push_back(Row::integer("rdp_max_iterations", "--rdp-max-iterations", 1, kMaxIterations, "1000",
                           "iterations", "RDP's L-BFGS iteration cap")
                  .for_methods(rdp)
                  .keys("", "rdp_max_iterations", "max_iterations")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.rdp.max_iterations = std::get<std::int64_t>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::int64_t{r.align.rdp.max_iterations};
                  }));
  t.push_back(Row::integer("rdp_memory", "--rdp-memory", 1, kMaxMemory, "30", "pairs",
                           "RDP's L-BFGS memory (correction pairs)")
                  .for_methods(rdp)
                  .keys("", "rdp_memory", "memory")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.rdp.memory = std::get<std::int64_t>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::int64_t{r.align.rdp.memory};
                  }));
  t.push_back(Row::flag("evaluate", "--no-evaluate", "true",
                        "compute the objective and the orthogonality error")
                  .negated()
                  .keys("", "", "")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.align.evaluate = std::get<bool>(v);
                  })
                  .load([](const AlignRequest& r) -> OptionValue { return r.align.evaluate; }));
  t.push_back(
      Row::flag("consensus", "--consensus", "false",
                "also compute the consensus objective (one more product over all anchors)")
          .when("with evaluate")
          .keys("", "", "")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.align.evaluate_consensus = std::get<bool>(v);
          })
          .load([](const AlignRequest& r) -> OptionValue { return r.align.evaluate_consensus; }));
  t.push_back(Row::choice("device", "--device", {"cpu", "cuda"}, "cpu",
                          "where the alignment runs (cuda: the GPU backend)")
                  .keys("device", "", "")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    r.device = parse_device(std::get<std::string>(v));
                  })
                  .load([](const AlignRequest& r) -> OptionValue { return to_string(r.device); }));
  t.push_back(Row::choice("precision", "--precision", {"float64", "float32"}, "float64",
                          "the computation's precision (double and float are accepted too)")
                  .not_python()
                  .keys("", "precision", "")
                  .store([](AlignRequest& r, const OptionValue& v) {
                    const std::string& p = std::get<std::string>(v);
                    if (p == "float64" || p == "double")
                      r.float32 = false;
                    else if (p == "float32" || p == "float")
                      r.float32 = true;
                    else
                      throw InvalidInput("unknown precision '" + p +
                                         "'; expected one of: float64, float32");
                  })
                  .load([](const AlignRequest& r) -> OptionValue {
                    return std::string(r.float32 ? "float32" : "float64");
                  }));
  t.push_back(
      Row::integer("threads", "--threads", 0, max_threads(), "0", "threads",
                   "CPU threads over users (an experiment file's key: its worker threads, one task "
                   "each); 0: all; at most 4 x the hardware threads")
          .keys("threads", "", "")
          .store([](AlignRequest& r, const OptionValue& v) {
            r.threads = static_cast<int>(std::get<std::int64_t>(v));
          })
          .load([](const AlignRequest& r) -> OptionValue { return std::int64_t{r.threads}; }));
  return t;
}

}  // namespace

const std::vector<OptionInfo>& option_schema() {
  static const std::vector<OptionInfo> schema = make_schema();
  return schema;
}

const OptionInfo* find_option(OptionEntry entry, const std::string& key, Method method) {
  if (key.empty()) return nullptr;
  const OptionInfo* found = nullptr;
  for (const auto& o : option_schema()) {
    if (o.key(entry) != key) continue;
    if (o.used_by(method)) return &o;
    if (!found) found = &o;
  }
  return found;
}

const OptionInfo& option_info(const std::string& name) {
  for (const auto& o : option_schema())
    if (o.name == name) return o;
  throw std::logic_error("option_info: no option named '" + name + "' in the schema");
}

}  // namespace dcalign
