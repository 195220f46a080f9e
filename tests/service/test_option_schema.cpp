// The option schema's promise (dcalign/options.hpp): one wrong value gets one message at every
// entry point that can be given it. Every row's bad values, derived from its type and range, go
// through the command line, experiment files, collaboration specs and model files here (Python:
// python/tests/test_options.py, the same derivation); each message must hold the entry's key
// followed by the same words.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dcalign/aligner.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/options.hpp"
#include "service/state.hpp"
#include "service_fixture.hpp"

namespace dcalign::service {
namespace {

namespace fs = std::filesystem;

/// A bad value: as text (command line, spec), as a TOML literal and as JSON (empty: that entry
/// cannot write it), and the words every message must carry after the key.
struct Bad {
  std::string text, toml, json;
  std::string words;
};

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// The bad values of a row, from its type and range alone.
std::vector<Bad> bad_values(const OptionInfo& o) {
  std::vector<Bad> out;
  const std::string range = " is out of range: expected " + o.expected();
  switch (o.type) {
    case OptionType::integer: {
      out.push_back({"-1", "-1", "-1", " -1" + range});
      if (o.max_int < (std::uint64_t{1} << 62)) {
        const std::string above = std::to_string(o.max_int + 1);
        out.push_back({above, above, above, " " + above + range});
      }
      out.push_back(
          {"2.5", "2.5", "2.5",
           " '2.5' is not an integer: expected a whole decimal number from " + o.expected()});
      break;
    }
    case OptionType::real:
      out.push_back({"-1", "-1.0", "-1.0", " -1" + range});
      out.push_back({"nan", "nan", "", " nan" + range});
      out.push_back({"inf", "inf", "", " inf" + range});
      break;
    case OptionType::choice:
      out.push_back({"bogus", quoted("bogus"), quoted("bogus"),
                     " 'bogus' is unknown: expected " + o.expected()});
      break;
    case OptionType::flag:
      break;  // no entry but Python takes a flag's value (python/tests/test_options.py)
  }
  return out;
}

Method method_for(const OptionInfo& o) { return o.methods.empty() ? Method::odc : o.methods[0]; }

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Checks that `message` holds `key` + `words` (after any context the entry puts in front).
void expect_message(const std::string& entry, const std::string& message, const std::string& key,
                    const std::string& words) {
  EXPECT_NE(message.find(key + words), std::string::npos)
      << entry << ": expected '" << key << words << "' in\n  " << message;
}

class OptionSchema : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dcalign_schema_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OptionSchema, EveryEntryPointGivesTheSameMessageForTheSameBadValue) {
  // Anchors for the command line and the models: 3 users, a = 12, l = 3.
  Stack<double> A(3, 12, 3);
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal;
  for (index_t k = 0; k < A.size(); ++k) A.data()[k] = normal(gen);
  const std::string anchors = (dir_ / "A.npy").string();
  write_npy<double>(anchors, A.view());
  std::map<Method, fs::path> models;  // one saved model per method, written on first use

  int checked = 0;
  for (const auto& o : option_schema()) {
    const Method m = method_for(o);
    for (const Bad& b : bad_values(o)) {
      SCOPED_TRACE(o.name + " = " + b.text);
      // The command line.
      if (!o.cli.empty()) {
        const fs::path err = dir_ / "stderr.txt";
        const std::string cmd = std::string(DCALIGN_CLI_PATH) + " align --anchors " + anchors +
                                " --out " + (dir_ / "G.npy").string() + " --method " +
                                to_string(m) + " " + o.cli + "=" + b.text + " 2> " + err.string();
        const int raw = std::system(cmd.c_str());
        EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 2) << cmd;
        expect_message("command line", read_all(err), o.cli, b.words);
        EXPECT_FALSE(fs::exists(dir_ / "G.npy"));
        ++checked;
      }
      // An experiment file.
      if (!o.toml.empty() && !b.toml.empty()) {
        const fs::path file = dir_ / "e.toml";
        std::ofstream(file) << "dataset = \"synthetic\"\n" << o.toml << " = " << b.toml << "\n";
        try {
          (void)experiment::load_config(file.string());
          ADD_FAILURE() << "experiment file: " << o.toml << " = " << b.toml << " was accepted";
        } catch (const InvalidInput& e) {
          expect_message("experiment file", e.what(), o.toml, b.words);
        }
        ++checked;
      }
      // A collaboration spec.
      if (!o.spec.empty()) {
        v1::CollaborationSpec spec = testing::small_spec(2);
        spec.set_method(to_string(m));
        (*spec.mutable_options())[o.spec] = b.text;
        try {
          check_spec(spec, 1 << 30);
          ADD_FAILURE() << "spec: " << o.spec << " = " << b.text << " was accepted";
        } catch (const InvalidInput& e) {
          expect_message("spec", e.what(), "spec.options." + o.spec, b.words);
        }
        ++checked;
      }
      // A model file whose method keeps the option.
      if (!o.model.empty() && !b.json.empty()) {
        if (!models.count(m)) {
          AlignOptions opts;
          opts.method = m;
          Aligner<double> model;
          model.fit(A, opts);
          models[m] = dir_ / ("model-" + to_string(m));
          model.save(models[m].string());
        }
        const fs::path json_path = models[m] / "model.json";
        const std::string original = read_all(json_path);
        nlohmann::ordered_json j = nlohmann::ordered_json::parse(original);
        const auto dot = o.model.find('.');
        auto& slot = dot == std::string::npos
                         ? j["options"][o.model]
                         : j["options"][o.model.substr(0, dot)][o.model.substr(dot + 1)];
        slot = nlohmann::ordered_json::parse(b.json);
        std::ofstream(json_path, std::ios::trunc) << j.dump(2);
        try {
          (void)Aligner<double>::load(models[m].string());
          ADD_FAILURE() << "model file: options." << o.model << " = " << b.json << " was accepted";
        } catch (const IoError& e) {
          expect_message("model file", e.what(), "options." + o.model, b.words);
        }
        std::ofstream(json_path, std::ios::trunc) << original;
        ++checked;
      }
    }
  }
  // Every kind of entry ran (a schema that lost its keys would leave this loop empty).
  EXPECT_GE(checked, 80);
}

// Values of the wrong type, where an entry has types (experiment files and model files; the
// command line and specs carry text): the same message too.
TEST_F(OptionSchema, AValueOfTheWrongTypeIsNamedAlike) {
  const OptionInfo& form = option_info("kawakami_form");
  const std::string words = " is an integer (3): expected a string, " + form.expected();
  const fs::path file = dir_ / "e.toml";
  std::ofstream(file) << "dataset = \"synthetic\"\nkawakami_form = 3\n";
  try {
    (void)experiment::load_config(file.string());
    ADD_FAILURE() << "kawakami_form = 3 was accepted";
  } catch (const InvalidInput& e) {
    expect_message("experiment file", e.what(), "kawakami_form", words);
  }
  AlignRequest r;
  try {
    set_option(r, form, OptionValue(std::int64_t{3}), "options.form", OptionEntry::model_file);
    ADD_FAILURE();
  } catch (const OptionTypeError& e) {
    expect_message("model file", e.what(), "options.form", words);
  }
}

// What a good value does is the same everywhere: text and typed values give the one normalised
// value, aliases their canonical name, and the stored value reads back.
TEST_F(OptionSchema, GoodValuesNormaliseAndRoundTrip) {
  const OptionInfo& tol = option_info("gopp_tolerance");
  EXPECT_EQ(std::get<double>(check_option(tol, std::string("1e-8"), "x")), 1e-8);
  EXPECT_EQ(std::get<double>(check_option(tol, std::int64_t{0}, "x")), 0.0);
  EXPECT_EQ(std::get<std::string>(check_option(option_info("svd"), std::string("Randomised"), "x")),
            "randomized");
  EXPECT_EQ(
      std::get<std::string>(check_option(option_info("precision"), std::string("float"), "x")),
      "float32");
  EXPECT_EQ(std::get<std::int64_t>(check_option(option_info("rdp_memory"), 7.0, "x")), 7);
  AlignRequest r;
  for (const auto& o : option_schema()) {
    // Every row reads back what it stores (its default included).
    const OptionValue v = get_option(r, o);
    AlignRequest copy;
    set_option(copy, o, v, o.name, OptionEntry::python);
    EXPECT_EQ(to_string(get_option(copy, o)), to_string(v)) << o.name;
    // The schema's default is the library's.
    EXPECT_EQ(to_string(v), o.default_value) << o.name;
  }
}

// The three method lists outside the method table follow it: the command line's --method help
// (generated), the Python docstring (generated, python/tests/test_options.py) and the service's
// proto comment (checked here).
TEST_F(OptionSchema, TheProtoCommentListsEveryMethod) {
  const std::string proto = read_all(DCALIGN_PROTO_FILE);
  std::string names;
  for (const auto& n : method_names()) names += (names.empty() ? "" : ", ") + n;
  EXPECT_NE(proto.find("string method = 2;             // " + names + "\n"), std::string::npos)
      << "proto/dcalign/service/v1/analyst.proto's method comment differs from the method table: "
      << names;
}

}  // namespace
}  // namespace dcalign::service
