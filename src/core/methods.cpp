#include "core/methods.hpp"

#include <stdexcept>

namespace dcalign::core {
namespace {

// The command line's files that only some methods read or write; the options that only some
// methods use are the option schema's (src/core/options.cpp).
const std::vector<std::string> kTargetOptions = {"--target", "--rotation", "--target-out"};

MethodInfo entry(Method m, const char* name, RunMethod<float> run_f32, RunMethod<double> run_f64) {
  MethodInfo info;
  info.method = m;
  info.name = name;
  info.run_f32 = run_f32;
  info.run_f64 = run_f64;
  return info;
}

// Kawakami-DC forms no target: its run function under the table's signature.
template <typename T>
void run_kawakami_entry(Context<T>& ctx, MatrixView<T>) {
  run_kawakami(ctx);
}

std::vector<MethodInfo> make_table() {
  std::vector<MethodInfo> t;

  MethodInfo odc = entry(Method::odc, "odc", &run_odc<float>, &run_odc<double>);
  odc.orthogonal = true;
  odc.lazy_scale_check = true;
  odc.uses_polar = true;
  odc.enrolment = Enrolment::procrustes;
  odc.model_keys = {"target", "reference_user", "rotation", "seed", "polar"};
  odc.cli_options = kTargetOptions;
  t.push_back(odc);

  MethodInfo imakura = entry(Method::imakura, "imakura", &run_imakura<float>, &run_imakura<double>);
  imakura.aliases = {"imakuradc"};
  imakura.uses_svd = true;
  imakura.model_keys = {"right", "seed", "svd"};
  imakura.cli_options = {"--target-out"};
  t.push_back(imakura);

  MethodInfo kawakami =
      entry(Method::kawakami, "kawakami", &run_kawakami_entry<float>, &run_kawakami_entry<double>);
  kawakami.aliases = {"kawakamidc"};
  kawakami.has_target = false;
  kawakami.objective = ObjectiveKind::consensus;
  kawakami.column_constraint = true;
  kawakami.uses_svd = true;
  kawakami.model_keys = {"form", "svd"};
  t.push_back(kawakami);

  MethodInfo gopp = entry(Method::gopp, "gopp", &run_gopp<float>, &run_gopp<double>);
  gopp.aliases = {"odcgopp"};
  gopp.orthogonal = true;
  gopp.objective = ObjectiveKind::tracked;
  gopp.tracked_is_consensus = true;
  gopp.uses_svd = true;
  gopp.uses_polar = true;
  gopp.enrolment = Enrolment::procrustes;
  gopp.model_keys = {"init",      "reference_user", "rotation",   "seed",      "svd",
                     "tolerance", "max_iterations", "iterations", "converged", "polar"};
  gopp.cli_options = kTargetOptions;
  t.push_back(gopp);

  MethodInfo opp = entry(Method::opp, "opp", &run_opp<float>, &run_opp<double>);
  opp.aliases = {"oppu1"};
  opp.orthogonal = true;
  opp.uses_svd = true;
  opp.uses_polar = true;
  opp.enrolment = Enrolment::procrustes;
  opp.model_keys = {"svd", "polar"};
  opp.cli_options = {"--target-out"};
  t.push_back(opp);

  MethodInfo rdp_ls = entry(Method::rdp_ls, "rdp-ls", &run_rdp<float>, &run_rdp<double>);
  rdp_ls.objective = ObjectiveKind::tracked;
  rdp_ls.uses_svd = true;
  rdp_ls.uses_polar = true;
  rdp_ls.model_keys = {"eta",   "gradient_tolerance", "max_iterations", "memory", "svd",
                       "polar", "iterations",         "converged"};
  rdp_ls.cli_options = {"--target-out"};
  t.push_back(rdp_ls);

  MethodInfo rdp_opp = rdp_ls;  // the same but for its start (src/core/rdp.cpp)
  rdp_opp.method = Method::rdp_opp;
  rdp_opp.name = "rdp-opp";
  t.push_back(rdp_opp);
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
  return list_in_words(names);
}

std::string list_in_words(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

}  // namespace dcalign::core
