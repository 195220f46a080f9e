#pragma once
// The method table: one description per alignment method, which every layer consults instead
// of its own list (the dispatch and evaluation of align.cpp, Aligner's save/load/enrol, the
// CLI's option rules, the experiment layer's names, the distributed layer). Adding a method
// means its file (run function), one entry in methods.cpp and a value of dcalign::Method.
#include <string>
#include <vector>

#include "core/common.hpp"

namespace dcalign::core {

/// How the report's objective is formed (align.cpp, evaluate).
enum class ObjectiveKind {
  to_target,  ///< sum_i ||A_i G_i - Z||^2 against the method's target Z
  tracked,    ///< the value the iteration tracked (GOPP: the consensus objective; RDP: eq. 24)
  consensus,  ///< sum_i ||A_i G_i - Zbar||^2 (Kawakami-DC, which has no target)
};

/// How Aligner enrols a user who joins later: the polar factor of A_new^T Z, or the least
/// squares solution of A_new G = Z.
enum class Enrolment { procrustes, least_squares };

template <typename T>
using RunMethod = void (*)(Context<T>&, MatrixView<T> target);

struct MethodInfo {
  Method method = Method::odc;
  const char* name = "";             ///< the canonical name: to_string(method)
  std::vector<std::string> aliases;  ///< other accepted spellings, after normalising (no '-')
  bool has_target = true;            ///< the method forms a target Z (written by --target-out)
  bool orthogonal = false;           ///< its G_i are orthogonal
  ObjectiveKind objective = ObjectiveKind::to_target;
  /// With ObjectiveKind::tracked: the tracked value is the consensus objective itself (GOPP,
  /// whose Z is the mean of the A_i G_i); otherwise the consensus is summed afterwards (RDP).
  bool tracked_is_consensus = false;
  /// The report's constraint_error is Kawakami-DC's column constraint max_k |sum_i ||A_i g_ik||^2 -
  /// 1|.
  bool column_constraint = false;
  /// The scale and value scan may wait until the method fails (ODC without the evaluation:
  /// its first product proves the anchors finite); the others scan first.
  bool lazy_scale_check = false;
  bool uses_svd = false;    ///< computes top-k singular vectors (--svd and model key "svd")
  bool uses_polar = false;  ///< computes polar factors (--polar and model key "polar")
  Enrolment enrolment = Enrolment::least_squares;
  /// The keys of model.json's "options" object (Aligner::save writes exactly these).
  std::vector<std::string> model_keys;
  /// The command line's method-specific files it reads or writes (--target, --rotation,
  /// --target-out); any other method refuses them. Options are the schema's
  /// (src/core/options.cpp), whose rows name the methods that use them.
  std::vector<std::string> cli_options;
  RunMethod<float> run_f32 = nullptr;
  RunMethod<double> run_f64 = nullptr;

  template <typename T>
  RunMethod<T> run() const;
};

template <>
inline RunMethod<float> MethodInfo::run<float>() const {
  return run_f32;
}
template <>
inline RunMethod<double> MethodInfo::run<double>() const {
  return run_f64;
}

/// Every method, in the order of dcalign::Method.
const std::vector<MethodInfo>& method_table();
const MethodInfo& method_info(Method m);
/// "odc and gopp": the methods whose cli_options hold `option`, for messages.
std::string methods_using(const std::string& cli_option);
/// "a", "a and b", "a, b and c": names as messages list them.
std::string list_in_words(const std::vector<std::string>& names);

}  // namespace dcalign::core
