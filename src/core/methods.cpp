#include "core/methods.hpp"

#include <stdexcept>

namespace dcalign::core {
namespace {

// Kawakami-DC forms no target; the table's run functions share one signature.
template <typename T>
void run_kawakami_entry(Context<T>& ctx, MatrixView<T>) {
  run_kawakami(ctx);
}

const std::vector<std::string> kTargetOptions = {"--target", "--reference-user", "--rotation",
                                                 "--target-rotation", "--target-out"};

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<MethodInfo> make_table() {
  std::vector<MethodInfo> t;
  // name, aliases, has_target, orthogonal, objective, tracked_is_consensus, column_constraint,
  // lazy_scale_check, uses_svd, uses_polar, enrolment, model keys, CLI options, run functions
  t.push_back({Method::odc,
               "odc",
               {},
               true,
               true,
               ObjectiveKind::to_target,
               false,
               false,
               true,
               false,
               true,
               Enrolment::procrustes,
               {"target", "reference_user", "rotation", "seed", "polar"},
               kTargetOptions,
               &run_odc<float>,
               &run_odc<double>});
  t.push_back({Method::imakura,
               "imakura",
               {"imakuradc"},
               true,
               false,
               ObjectiveKind::to_target,
               false,
               false,
               false,
               true,
               false,
               Enrolment::least_squares,
               {"right", "seed", "svd"},
               {"--right", "--target-out"},
               &run_imakura<float>,
               &run_imakura<double>});
  t.push_back({Method::kawakami,
               "kawakami",
               {"kawakamidc"},
               false,
               false,
               ObjectiveKind::consensus,
               false,
               true,
               false,
               true,
               false,
               Enrolment::least_squares,
               {"form", "svd"},
               {"--kawakami-form"},
               &run_kawakami_entry<float>,
               &run_kawakami_entry<double>});
  t.push_back({Method::gopp,
               "gopp",
               {"odcgopp"},
               true,
               true,
               ObjectiveKind::tracked,
               true,
               false,
               false,
               true,
               true,
               Enrolment::procrustes,
               {"init", "reference_user", "rotation", "seed", "svd", "tolerance", "max_iterations",
                "iterations", "converged", "polar"},
               join(kTargetOptions, {"--gopp-init", "--gopp-tolerance", "--gopp-max-iterations"}),
               &run_gopp<float>,
               &run_gopp<double>});
  t.push_back({Method::opp,
               "opp",
               {"oppu1"},
               true,
               true,
               ObjectiveKind::to_target,
               false,
               false,
               false,
               true,
               true,
               Enrolment::procrustes,
               {"svd", "polar"},
               {"--target-out"},
               &run_opp<float>,
               &run_opp<double>});
  const std::vector<std::string> rdp_keys = {
      "eta",   "gradient_tolerance", "max_iterations", "memory", "svd",
      "polar", "iterations",         "converged"};
  const std::vector<std::string> rdp_cli = {"--rdp-eta", "--rdp-gradient-tolerance",
                                            "--rdp-max-iterations", "--rdp-memory", "--target-out"};
  t.push_back({Method::rdp_ls,
               "rdp-ls",
               {},
               true,
               false,
               ObjectiveKind::tracked,
               false,
               false,
               false,
               true,
               true,
               Enrolment::least_squares,
               rdp_keys,
               rdp_cli,
               &run_rdp<float>,
               &run_rdp<double>});
  t.push_back({Method::rdp_opp,
               "rdp-opp",
               {},
               true,
               false,
               ObjectiveKind::tracked,
               false,
               false,
               false,
               true,
               true,
               Enrolment::least_squares,
               rdp_keys,
               rdp_cli,
               &run_rdp<float>,
               &run_rdp<double>});
  return t;
}

}  // namespace

const std::vector<MethodInfo>& method_table() {
  static const std::vector<MethodInfo> table = make_table();
  return table;
}

const MethodInfo& method_info(Method m) {
  for (const auto& info : method_table())
    if (info.method == m) return info;
  throw std::logic_error("method_info: a dcalign::Method without a table entry");
}

std::string methods_using(const std::string& cli_option) {
  std::vector<std::string> names;
  for (const auto& info : method_table())
    for (const auto& o : info.cli_options)
      if (o == cli_option) names.push_back(info.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

}  // namespace dcalign::core
