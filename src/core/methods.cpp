#include "core/methods.hpp"

#include <stdexcept>

namespace dcalign::core {
namespace {

const std::vector<std::string> kTargetOptions = {"--target", "--reference-user", "--rotation",
                                                 "--target-rotation", "--target-out"};

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

template <template <typename> class Run>
MethodInfo entry(Method m, const char* name) {
  MethodInfo info;
  info.method = m;
  info.name = name;
  info.run_f32 = &Run<float>::call;
  info.run_f64 = &Run<double>::call;
  return info;
}

// The run functions under one signature (Kawakami-DC takes no target).
template <typename T>
struct Odc {
  static void call(Context<T>& c, MatrixView<T> z) { run_odc(c, z); }
};
template <typename T>
struct Imakura {
  static void call(Context<T>& c, MatrixView<T> z) { run_imakura(c, z); }
};
template <typename T>
struct Kawakami {
  static void call(Context<T>& c, MatrixView<T>) { run_kawakami(c); }
};
template <typename T>
struct Gopp {
  static void call(Context<T>& c, MatrixView<T> z) { run_gopp(c, z); }
};
template <typename T>
struct Opp {
  static void call(Context<T>& c, MatrixView<T> z) { run_opp(c, z); }
};
template <typename T>
struct Rdp {
  static void call(Context<T>& c, MatrixView<T> z) { run_rdp(c, z); }
};

std::vector<MethodInfo> make_table() {
  std::vector<MethodInfo> t;

  MethodInfo odc = entry<Odc>(Method::odc, "odc");
  odc.orthogonal = true;
  odc.lazy_scale_check = true;
  odc.uses_polar = true;
  odc.enrolment = Enrolment::procrustes;
  odc.model_keys = {"target", "reference_user", "rotation", "seed", "polar"};
  odc.cli_options = kTargetOptions;
  t.push_back(odc);

  MethodInfo imakura = entry<Imakura>(Method::imakura, "imakura");
  imakura.aliases = {"imakuradc"};
  imakura.uses_svd = true;
  imakura.model_keys = {"right", "seed", "svd"};
  imakura.cli_options = {"--right", "--target-out"};
  t.push_back(imakura);

  MethodInfo kawakami = entry<Kawakami>(Method::kawakami, "kawakami");
  kawakami.aliases = {"kawakamidc"};
  kawakami.has_target = false;
  kawakami.objective = ObjectiveKind::consensus;
  kawakami.column_constraint = true;
  kawakami.uses_svd = true;
  kawakami.model_keys = {"form", "svd"};
  kawakami.cli_options = {"--kawakami-form"};
  t.push_back(kawakami);

  MethodInfo gopp = entry<Gopp>(Method::gopp, "gopp");
  gopp.aliases = {"odcgopp"};
  gopp.orthogonal = true;
  gopp.objective = ObjectiveKind::tracked;
  gopp.tracked_is_consensus = true;
  gopp.uses_svd = true;
  gopp.uses_polar = true;
  gopp.enrolment = Enrolment::procrustes;
  gopp.model_keys = {"init",      "reference_user", "rotation",   "seed",      "svd",
                     "tolerance", "max_iterations", "iterations", "converged", "polar"};
  gopp.cli_options =
      join(kTargetOptions, {"--gopp-init", "--gopp-tolerance", "--gopp-max-iterations"});
  t.push_back(gopp);

  MethodInfo opp = entry<Opp>(Method::opp, "opp");
  opp.aliases = {"oppu1"};
  opp.orthogonal = true;
  opp.uses_svd = true;
  opp.uses_polar = true;
  opp.enrolment = Enrolment::procrustes;
  opp.model_keys = {"svd", "polar"};
  opp.cli_options = {"--target-out"};
  t.push_back(opp);

  MethodInfo rdp_ls = entry<Rdp>(Method::rdp_ls, "rdp-ls");
  rdp_ls.objective = ObjectiveKind::tracked;
  rdp_ls.uses_svd = true;
  rdp_ls.uses_polar = true;
  rdp_ls.model_keys = {"eta",   "gradient_tolerance", "max_iterations", "memory", "svd",
                       "polar", "iterations",         "converged"};
  rdp_ls.cli_options = {"--rdp-eta", "--rdp-gradient-tolerance", "--rdp-max-iterations",
                        "--rdp-memory", "--target-out"};
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
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

}  // namespace dcalign::core
