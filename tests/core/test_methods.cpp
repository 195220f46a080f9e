// The method table (src/core/methods.cpp): one entry per dcalign::Method, names that round-trip,
// and the consistency rules between its fields that the other layers rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/methods.hpp"
#include "dcalign/error.hpp"
#include "dcalign/options.hpp"

namespace dcalign::core {
namespace {

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(MethodTable, OneEntryPerMethodInEnumOrder) {
  const auto& t = method_table();
  ASSERT_EQ(t.size(), 7u);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(t[i].method), i) << t[i].name;
    EXPECT_EQ(&method_info(t[i].method), &t[i]);
    EXPECT_NE(t[i].run_f32, nullptr) << t[i].name;
    EXPECT_NE(t[i].run_f64, nullptr) << t[i].name;
  }
  EXPECT_EQ(method_names(), (std::vector<std::string>{"odc", "imakura", "kawakami", "gopp", "opp",
                                                      "rdp-ls", "rdp-opp"}));
}

TEST(MethodTable, NamesAndAliasesRoundTrip) {
  std::set<std::string> seen;
  for (const auto& info : method_table()) {
    EXPECT_TRUE(seen.insert(info.name).second) << "name twice: " << info.name;
    EXPECT_EQ(to_string(info.method), info.name);
    EXPECT_EQ(parse_method(info.name), info.method);
    for (const auto& alias : info.aliases) {
      EXPECT_TRUE(seen.insert(alias).second) << "alias twice: " << alias;
      EXPECT_EQ(parse_method(alias), info.method) << alias;
    }
  }
  EXPECT_EQ(parse_method("Imakura-DC"), Method::imakura);
  EXPECT_EQ(parse_method("RDP_LS"), Method::rdp_ls);
  try {
    parse_method("procrustes");
    FAIL() << "an unknown name was accepted";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    for (const auto& name : method_names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(MethodTable, FieldsAreConsistent) {
  for (const auto& info : method_table()) {
    SCOPED_TRACE(info.name);
    // The model file stores the SVD and polar settings exactly where the method uses them.
    EXPECT_EQ(has(info.model_keys, "svd"), info.uses_svd);
    EXPECT_EQ(has(info.model_keys, "polar"), info.uses_polar);
    // Procrustes enrolment gives orthogonal G_i, which only orthogonal methods promise.
    if (info.enrolment == Enrolment::procrustes) {
      EXPECT_TRUE(info.orthogonal);
    }
    // Without a target there is nothing to write with --target-out, and the objective is the
    // consensus one.
    EXPECT_EQ(has(info.cli_options, "--target-out"), info.has_target);
    if (!info.has_target) {
      EXPECT_EQ(info.objective, ObjectiveKind::consensus);
    }
    if (info.tracked_is_consensus) {
      EXPECT_EQ(info.objective, ObjectiveKind::tracked);
    }
    // Only a method whose first product proves the anchors finite may check the scale late.
    if (info.lazy_scale_check) {
      EXPECT_FALSE(info.uses_svd);
    }
    for (const auto& opt : info.cli_options) EXPECT_EQ(opt.rfind("--", 0), 0u) << opt;
  }
  // The options' methods are the schema's (dcalign/options.hpp).
  EXPECT_EQ(option_info("right").methods_text(), "imakura");
  EXPECT_EQ(option_info("reference_user").methods_text(), "odc and gopp");
  EXPECT_EQ(methods_using("--target-out"), "odc, imakura, gopp, opp, rdp-ls and rdp-opp");
}

}  // namespace
}  // namespace dcalign::core
