// Molecules: Morgan fingerprints against RDKit's Python bindings (tests/data/molecules/
// make_reference.py wrote the reference), SMILES RDKit rejects, option bounds, the BBBP loader
// and its fingerprint cache (stale, damaged and missing cache files).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dataset_guard.hpp"
#include "dcalign/data.hpp"
#include "dcalign/error.hpp"

namespace dcalign::data {
namespace {

namespace fs = std::filesystem;

nlohmann::json reference() {
  std::ifstream f(std::string(DCALIGN_TEST_DATA_DIR) + "/molecules/morgan_reference.json");
  return nlohmann::json::parse(f);
}

std::vector<int> on_bits(const Matrix<double>& X, index_t row) {
  std::vector<int> bits;
  for (index_t j = 0; j < X.cols(); ++j) {
    EXPECT_TRUE(X(row, j) == 0.0 || X(row, j) == 1.0);
    if (X(row, j) == 1.0) bits.push_back(static_cast<int>(j));
  }
  return bits;
}

#define DCALIGN_REQUIRE_RDKIT()                                   \
  do {                                                            \
    if (!have_rdkit()) GTEST_SKIP() << "this build has no RDKit"; \
  } while (0)

TEST(DataMolecules, MorganFingerprintsMatchRdkitPython) {
  DCALIGN_REQUIRE_RDKIT();
  const auto ref = reference();
  std::vector<std::string> smiles;
  for (const auto& m : ref["molecules"]) smiles.push_back(m["smiles"]);
  const Fingerprints fp = morgan_fingerprints(smiles);
  ASSERT_EQ(fp.X.rows(), static_cast<index_t>(smiles.size()));
  ASSERT_EQ(fp.X.cols(), 2048);
  EXPECT_TRUE(fp.failed.empty());
  for (size_t i = 0; i < smiles.size(); ++i) {
    EXPECT_EQ(fp.rows[i], static_cast<index_t>(i));
    EXPECT_EQ(fp.canonical[i], ref["molecules"][i]["canonical"].get<std::string>()) << smiles[i];
    EXPECT_EQ(on_bits(fp.X, static_cast<index_t>(i)),
              ref["molecules"][i]["on_bits"].get<std::vector<int>>())
        << smiles[i];
  }
  // Other settings: radius 1 folded to 64 bits.
  std::vector<std::string> three(smiles.begin(), smiles.begin() + 3);
  const Fingerprints small = morgan_fingerprints(three, {1, 64});
  ASSERT_EQ(small.X.cols(), 64);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(on_bits(small.X, static_cast<index_t>(i)),
              ref["radius1_bits64"][i]["on_bits"].get<std::vector<int>>());
}

TEST(DataMolecules, UnreadableSmilesAreLeftOutAndNamed) {
  DCALIGN_REQUIRE_RDKIT();
  const auto ref = reference();
  std::vector<std::string> smiles = {"CCO"};
  for (const auto& s : ref["invalid"]) smiles.push_back(s);
  smiles.push_back("c1ccccc1O");
  const Fingerprints fp = morgan_fingerprints(smiles);
  ASSERT_EQ(fp.X.rows(), 2);
  EXPECT_EQ(fp.rows, (std::vector<index_t>{0, static_cast<index_t>(smiles.size()) - 1}));
  std::vector<index_t> failed;
  for (size_t k = 1; k + 1 < smiles.size(); ++k) failed.push_back(static_cast<index_t>(k));
  EXPECT_EQ(fp.failed, failed);
  EXPECT_EQ(fp.canonical[1], ref["molecules"][1]["canonical"].get<std::string>());
}

TEST(DataMolecules, OptionsAreBounded) {
  EXPECT_THROW(morgan_fingerprints({"CCO"}, {9, 2048}), InvalidInput);
  EXPECT_THROW(morgan_fingerprints({"CCO"}, {-1, 2048}), InvalidInput);
  EXPECT_THROW(morgan_fingerprints({"CCO"}, {2, 0}), InvalidInput);
  EXPECT_THROW(morgan_fingerprints({"CCO"}, {2, 65537}), InvalidInput);
  // 2^31 values would be 16 GiB of doubles: refused before anything is parsed.
  const std::vector<std::string> many(40000, "C");
  EXPECT_THROW(morgan_fingerprints(many, {2, 65536}), InvalidInput);
  if (!have_rdkit()) {
    EXPECT_THROW(morgan_fingerprints({"CCO"}), BackendError);
  }
}

class DataMoleculeSets : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_rdkit()) GTEST_SKIP() << "this build has no RDKit (librdkit-dev)";
    dir_ = resolve_data_dir("");
    DCALIGN_REQUIRE_DATASET(!fs::exists(fs::path(dir_) / "molecules" / "BBBP.csv"),
                            "molecules/BBBP.csv not found under " << dir_);
    cache_ = fs::temp_directory_path() /
             ("dcalign_molecule_cache_" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(cache_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(cache_, ec);
  }
  LoadOptions options() const {
    LoadOptions o;
    o.cache_dir = cache_.string();
    return o;
  }
  std::string dir_;
  fs::path cache_;
};

TEST_F(DataMoleculeSets, BbbpMatchesRdkitPythonAndTheCacheGivesTheSameRows) {
  const auto ref = reference()["bbbp"];
  const TrainTest a = load_dataset("bbbp", options());
  const Dataset& d = a.train;
  EXPECT_EQ(a.test.samples(), 0);  // no official split
  ASSERT_EQ(d.samples(), ref["kept"].get<index_t>());
  ASSERT_EQ(d.features(), 2048);
  EXPECT_EQ(d.num_classes, 2);
  index_t ones = 0;
  for (double v : d.y) ones += v == 1.0;
  EXPECT_EQ(ones, ref["label_counts"][1].get<index_t>());
  for (size_t i = 0; i < ref["first_rows"].size(); ++i) {
    const auto& r = ref["first_rows"][i];
    EXPECT_EQ(on_bits(d.X, static_cast<index_t>(i)), r["on_bits"].get<std::vector<int>>());
    EXPECT_EQ(d.y[i], r["label"].get<double>());
    EXPECT_EQ(d.sample_ids[i], r["canonical"].get<std::string>());
  }
  EXPECT_NE(d.note.find("11 SMILES RDKit cannot read left out"), std::string::npos) << d.note;

  // The second load reads the cache written by the first and gives the same data.
  const fs::path file = cache_ / "bbbp_morgan_r2_2048.bin";
  ASSERT_TRUE(fs::exists(file));
  const auto written = fs::last_write_time(file);
  const TrainTest b = load_dataset("bbbp", options());
  EXPECT_EQ(fs::last_write_time(file), written);
  EXPECT_EQ(b.train.sample_ids, d.sample_ids);
  EXPECT_EQ(b.train.y, d.y);
  EXPECT_TRUE(std::equal(d.X.data(), d.X.data() + d.X.size(), b.train.X.data()));

  // A damaged cache file is recomputed and replaced, not trusted or fatal.
  fs::resize_file(file, fs::file_size(file) / 2);
  const TrainTest c = load_dataset("bbbp", options());
  EXPECT_TRUE(std::equal(d.X.data(), d.X.data() + d.X.size(), c.train.X.data()));
  EXPECT_EQ(c.train.sample_ids, d.sample_ids);
  { std::ofstream(file, std::ios::binary | std::ios::trunc) << "dcalign-morgan-1\nnot a cache"; }
  const TrainTest e = load_dataset("bbbp", options());
  EXPECT_EQ(e.train.y, d.y);
  EXPECT_GT(fs::file_size(file), 100000u);  // rewritten whole

  // Without the cache: the same data, and nothing written.
  LoadOptions off = options();
  off.cache = false;
  off.cache_dir = (cache_ / "unused").string();
  const TrainTest f = load_dataset("bbbp", off);
  EXPECT_EQ(f.train.sample_ids, d.sample_ids);
  EXPECT_FALSE(fs::exists(cache_ / "unused"));
}

TEST(DataMoleculeNames, AreListedWithTheirFiles) {
  const auto names = dataset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "hiv"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "bbbp"), names.end());
  EXPECT_EQ(dataset_files("hiv"), (std::vector<std::string>{"molecules/hiv.csv.gz"}));
  EXPECT_EQ(dataset_files("bbbp"), (std::vector<std::string>{"molecules/BBBP.csv"}));
}

}  // namespace
}  // namespace dcalign::data
