// Named dataset loaders. Tests on the real files compare against the counts documented in
// ../shared/datasets/README.md (or computed independently from the raw files) and are skipped
// when that folder is absent; tests on synthetic files in a temporary directory always run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/file_util.hpp"
#include "dataset_guard.hpp"
#include "dcalign/data.hpp"

namespace fs = std::filesystem;
using namespace dcalign;
using namespace dcalign::data;
using ::testing::HasSubstr;

namespace {

const std::string kShared = DCALIGN_SHARED_DATASETS;

// Skips the calling test when the shared dataset folder (or the part it needs) is missing; under
// CI=true fails instead (tests/dataset_guard.hpp).
#define REQUIRE_SHARED(sub)                                                                    \
  DCALIGN_REQUIRE_DATASET(!fs::exists(fs::path(kShared) / (sub)),                              \
                          "shared dataset folder " << (fs::path(kShared) / (sub))              \
                                                   << " not found; set up ../shared/datasets " \
                                                      "(see scripts/download_datasets.sh)")

LoadOptions shared_opts(bool standardize = true) {
  LoadOptions o;
  o.data_dir = kShared;
  o.standardize = standardize;
  return o;
}

using dcalign::testing::be32;
using dcalign::testing::read_bytes;
using dcalign::testing::TempDir;
using dcalign::testing::write_bytes;
using dcalign::testing::write_gz;

// Bytes [offset, offset + n) of the decompressed content of a gzip file, read with zlib
// directly: an oracle independent of the reader under test.
std::vector<unsigned char> gz_slice(const std::string& path, long offset, unsigned n) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::vector<unsigned char> out(n);
  if (f == nullptr) return out;
  EXPECT_EQ(gzseek(f, offset, SEEK_SET), offset);
  EXPECT_EQ(gzread(f, out.data(), n), static_cast<int>(n));
  gzclose(f);
  return out;
}

std::vector<index_t> class_counts(const std::vector<double>& y, index_t k) {
  std::vector<index_t> counts(static_cast<size_t>(k), 0);
  for (double v : y) {
    EXPECT_EQ(v, std::floor(v));
    EXPECT_GE(v, 0);
    EXPECT_LT(v, k);
    if (v >= 0 && v < k) ++counts[static_cast<size_t>(v)];
  }
  return counts;
}

void expect_range(const Matrix<double>& X, double lo, double hi) {
  const auto [mn, mx] = std::minmax_element(X.values().begin(), X.values().end());
  EXPECT_EQ(*mn, lo);
  EXPECT_EQ(*mx, hi);
}

// Column mean and population standard deviation.
std::pair<double, double> column_stats(const Matrix<double>& X, index_t c) {
  double m = 0, s = 0;
  for (index_t i = 0; i < X.rows(); ++i) m += X(i, c);
  m /= static_cast<double>(X.rows());
  for (index_t i = 0; i < X.rows(); ++i) s += (X(i, c) - m) * (X(i, c) - m);
  return {m, std::sqrt(s / static_cast<double>(X.rows()))};
}

template <typename F>
void expect_error(F f, const std::vector<std::string>& parts) {
  dcalign::testing::expect_io_error(f, parts);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Real files

TEST(Datasets, MnistOfficialSplitCountsRangeAndLayout) {
  REQUIRE_SHARED("mnist");
  const TrainTest tt = load_dataset("mnist", shared_opts());
  ASSERT_EQ(tt.train.samples(), 60000);
  ASSERT_EQ(tt.test.samples(), 10000);
  EXPECT_EQ(tt.train.features(), 784);
  EXPECT_EQ(tt.test.features(), 784);
  EXPECT_EQ(tt.train.num_classes, 10);
  EXPECT_EQ(tt.train.feature_names.size(), 784u);
  EXPECT_EQ(tt.train.feature_names[29], "pixel_1_1");
  EXPECT_EQ(class_counts(tt.train.y, 10),
            (std::vector<index_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}));
  EXPECT_EQ(class_counts(tt.test.y, 10),
            (std::vector<index_t>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}));
  expect_range(tt.train.X, 0.0, 1.0);
  expect_range(tt.test.X, 0.0, 1.0);
  // The well-known MNIST training mean intensity.
  double sum = 0;
  for (double v : tt.train.X.values()) sum += v;
  EXPECT_NEAR(sum / static_cast<double>(tt.train.X.size()), 0.1307, 5e-4);
  // Row i of X is image i in pixel order: compare a few images with bytes read by zlib here.
  const std::string images = kShared + "/mnist/train-images-idx3-ubyte.gz";
  for (index_t i : {index_t{0}, index_t{1}, index_t{59999}}) {
    const auto raw = gz_slice(images, 16 + 784 * i, 784);
    for (index_t j = 0; j < 784; ++j)
      ASSERT_EQ(tt.train.X(i, j), raw[static_cast<size_t>(j)] / 255.0) << i << ", " << j;
  }
  EXPECT_EQ(tt.train.y[0], 5.0);  // the first training digit is a 5
  EXPECT_TRUE(tt.train.continuous_columns.empty());
}

TEST(Datasets, FashionMnistLabelsAndTestImages) {
  REQUIRE_SHARED("fashion-mnist");
  const std::string dir = kShared + "/fashion-mnist/";
  // The readers directly: the full loader is exercised on MNIST, and loading 60000 more images
  // here would only repeat it.
  const auto train_labels = read_idx_labels(dir + "train-labels-idx1-ubyte.gz");
  ASSERT_EQ(train_labels.size(), 60000u);
  std::vector<index_t> counts(10, 0);
  for (auto v : train_labels) {
    ASSERT_LT(v, 10);
    ++counts[v];
  }
  EXPECT_EQ(counts, std::vector<index_t>(10, 6000));
  const IdxImages test = read_idx_images(dir + "t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(test.rows, 28);
  EXPECT_EQ(test.cols, 28);
  EXPECT_EQ(*std::max_element(test.pixels.begin(), test.pixels.end()), 255);
  const auto test_labels = read_idx_labels(dir + "t10k-labels-idx1-ubyte.gz");
  std::vector<index_t> tcounts(10, 0);
  for (auto v : test_labels) ++tcounts[v];
  EXPECT_EQ(tcounts, std::vector<index_t>(10, 1000));
  const SampleCounts sc = sample_counts("fashion-mnist", shared_opts());
  EXPECT_EQ(sc.train, 60000);
  EXPECT_EQ(sc.test, 10000);
}

TEST(Datasets, AdultDropsMissingOneHotsAndStandardisesWithTrainStatistics) {
  REQUIRE_SHARED("adult");
  const TrainTest tt = load_dataset("adult", shared_opts());
  // 32561 - 2399 and 16281 - 1221 rows without '?'.
  ASSERT_EQ(tt.train.samples(), 30162);
  ASSERT_EQ(tt.test.samples(), 15060);
  EXPECT_EQ(class_counts(tt.train.y, 2), (std::vector<index_t>{30162 - 7508, 7508}));
  EXPECT_EQ(class_counts(tt.test.y, 2), (std::vector<index_t>{15060 - 3700, 3700}));
  // 6 numeric + 7 + 16 + 7 + 14 + 6 + 5 + 2 + 41 categories seen in training.
  ASSERT_EQ(tt.train.features(), 104);
  EXPECT_EQ(tt.train.feature_names[0], "age");
  EXPECT_EQ(tt.train.feature_names[1], "workclass=Federal-gov");
  EXPECT_EQ(tt.train.feature_names[7], "workclass=Without-pay");
  EXPECT_EQ(tt.train.feature_names[8], "fnlwgt");
  EXPECT_EQ(tt.train.class_names, (std::vector<std::string>{"<=50K", ">50K"}));
  ASSERT_EQ(tt.train.continuous_columns.size(), 6u);
  for (index_t c : tt.train.continuous_columns) {
    const auto [m, sd] = column_stats(tt.train.X, c);
    EXPECT_NEAR(m, 0.0, 1e-9) << tt.train.feature_names[c];
    EXPECT_NEAR(sd, 1.0, 1e-9) << tt.train.feature_names[c];
  }
  // Train statistics applied to test: the test mean is near 0 but not exactly 0.
  const auto [test_age_mean, test_age_sd] = column_stats(tt.test.X, 0);
  EXPECT_NEAR(test_age_mean, 0.0, 0.05);
  EXPECT_GT(std::abs(test_age_mean), 1e-6);
  EXPECT_NEAR(test_age_sd, 1.0, 0.05);
  // First row: age 39 -> (39 - 38.4379...) / 13.1344... with the population sd.
  EXPECT_NEAR(tt.train.X(0, 0), 0.04279571, 1e-7);
  // Every row has exactly one indicator per categorical field (8 fields): no test category is
  // unseen in training once incomplete rows are dropped.
  for (const Dataset* d : {&tt.train, &tt.test}) {
    for (index_t i = 0; i < d->samples(); i += 97) {
      double ones = 0;
      for (index_t j = 0; j < d->features(); ++j) {
        const bool cont = std::count(d->continuous_columns.begin(), d->continuous_columns.end(), j);
        if (cont) continue;
        EXPECT_TRUE(d->X(i, j) == 0.0 || d->X(i, j) == 1.0);
        ones += d->X(i, j);
      }
      ASSERT_EQ(ones, 8.0) << i;
    }
  }
  const auto raw = load_dataset("adult", shared_opts(false));
  EXPECT_EQ(raw.train.X(0, 0), 39.0);
  EXPECT_EQ(raw.train.X(0, 8), 77516.0);
  EXPECT_EQ(raw.test.X(0, 0), 25.0);
}

TEST(Datasets, PimaImputesZerosAsPaper004) {
  REQUIRE_SHARED("pima-diabetes");
  const TrainTest tt = load_dataset("pima-diabetes", shared_opts(false));
  ASSERT_EQ(tt.train.samples(), 768);
  EXPECT_EQ(tt.train.features(), 8);
  EXPECT_EQ(tt.test.samples(), 0);
  EXPECT_EQ(tt.test.features(), 8);
  EXPECT_EQ(class_counts(tt.train.y, 2), (std::vector<index_t>{500, 268}));
  // Row 75 has glucose 0 (mean of the 763 non-zero values), row 7 blood pressure 0 (mean) and
  // skin thickness 0 (median 29), row 0 insulin 0 (median 125), row 9 BMI 0 (median 32.3).
  EXPECT_NEAR(tt.train.X(75, 1), 121.6867627785059, 1e-9);
  EXPECT_NEAR(tt.train.X(7, 2), 72.40518417462484, 1e-9);
  EXPECT_EQ(tt.train.X(7, 3), 29.0);
  EXPECT_EQ(tt.train.X(0, 4), 125.0);
  EXPECT_EQ(tt.train.X(9, 5), 32.3);
  EXPECT_EQ(tt.train.X(0, 0), 6.0);  // pregnancies: zeros are real values and stay
  for (index_t c = 1; c <= 5; ++c)
    for (index_t i = 0; i < 768; ++i) ASSERT_NE(tt.train.X(i, c), 0.0) << i << ", " << c;
  const TrainTest st = load_dataset("pima-diabetes", shared_opts());
  for (index_t c = 0; c < 8; ++c) {
    const auto [m, sd] = column_stats(st.train.X, c);
    EXPECT_NEAR(m, 0.0, 1e-9);
    EXPECT_NEAR(sd, 1.0, 1e-9);
  }
}

TEST(Datasets, HeartDiseaseDropsMissingAndBinarisesTarget) {
  REQUIRE_SHARED("heart-disease");
  const TrainTest tt = load_dataset("heart-disease", shared_opts(false));
  ASSERT_EQ(tt.train.samples(), 297);  // 303 rows, 6 with '?'
  // 6 continuous + 3 binary + cp 4 + restecg 3 + slope 3 + thal 3.
  EXPECT_EQ(tt.train.features(), 22);
  EXPECT_EQ(class_counts(tt.train.y, 2), (std::vector<index_t>{160, 137}));
  EXPECT_EQ(tt.train.continuous_columns.size(), 6u);
  const auto& names = tt.train.feature_names;
  EXPECT_EQ(std::vector<std::string>(names.begin() + 2, names.begin() + 6),
            (std::vector<std::string>{"cp=1", "cp=2", "cp=3", "cp=4"}));
  EXPECT_EQ(names.back(), "thal=7");
  // Row 0: 63, male, cp 1, ..., thal 6, num 0.
  EXPECT_EQ(tt.train.X(0, 0), 63.0);
  EXPECT_EQ(tt.train.X(0, 1), 1.0);
  EXPECT_EQ(tt.train.X(0, 2), 1.0);
  EXPECT_EQ(tt.train.X(0, 5), 0.0);
  EXPECT_EQ(tt.train.X(0, 20), 1.0);  // thal=6
  EXPECT_EQ(tt.train.y[0], 0.0);
  EXPECT_EQ(tt.train.y[1], 1.0);  // num 2 means disease
}

TEST(Datasets, GermanCreditOneHotAndLabels) {
  REQUIRE_SHARED("german-credit");
  const TrainTest tt = load_dataset("german-credit", shared_opts(false));
  ASSERT_EQ(tt.train.samples(), 1000);
  // 7 numeric + 4+5+10+5+5+4+3+4+3+3+4+2+2 category codes.
  EXPECT_EQ(tt.train.features(), 61);
  EXPECT_EQ(class_counts(tt.train.y, 2), (std::vector<index_t>{700, 300}));
  EXPECT_EQ(tt.train.class_names, (std::vector<std::string>{"good", "bad"}));
  EXPECT_EQ(tt.train.feature_names[0], "checking_status=A11");
  EXPECT_EQ(tt.train.feature_names[4], "duration_months");
  EXPECT_EQ(tt.train.X(0, 0), 1.0);  // A11
  EXPECT_EQ(tt.train.X(0, 4), 6.0);  // 6 months
  EXPECT_EQ(tt.train.continuous_columns.size(), 7u);
}

TEST(Datasets, DigitsAndBreastCancer) {
  REQUIRE_SHARED("sklearn");
  const TrainTest digits = load_dataset("digits", shared_opts());
  ASSERT_EQ(digits.train.samples(), 1797);
  EXPECT_EQ(digits.train.features(), 64);
  EXPECT_EQ(digits.test.samples(), 0);
  EXPECT_EQ(class_counts(digits.train.y, 10),
            (std::vector<index_t>{178, 182, 177, 183, 181, 182, 181, 179, 174, 180}));
  expect_range(digits.train.X, 0.0, 1.0);
  EXPECT_EQ(digits.train.X(0, 2), 5.0 / 16.0);  // first row: 0,0,5,13,...

  const TrainTest bc = load_dataset("breast-cancer", shared_opts(false));
  ASSERT_EQ(bc.train.samples(), 569);
  EXPECT_EQ(bc.train.features(), 30);
  EXPECT_EQ(class_counts(bc.train.y, 2), (std::vector<index_t>{212, 357}));
  EXPECT_EQ(bc.train.class_names, (std::vector<std::string>{"malignant", "benign"}));
  EXPECT_EQ(bc.train.feature_names[0], "mean radius");
  EXPECT_EQ(bc.train.feature_names[10], "radius error");
  EXPECT_EQ(bc.train.feature_names[29], "worst fractal dimension");
  EXPECT_EQ(bc.train.X(0, 0), 17.99);
}

// The regression set: 442 patients, ten raw baseline variables, the disease progression one year
// later as a real target (sklearn's diabetes.target: 25 to 346, mean 152.13).
TEST(Datasets, DiabetesIsARegressionTask) {
  REQUIRE_SHARED("sklearn");
  const TrainTest d = load_dataset("diabetes", shared_opts(false));
  ASSERT_EQ(d.train.samples(), 442);
  EXPECT_EQ(d.train.features(), 10);
  EXPECT_EQ(d.train.num_classes, 0);
  EXPECT_TRUE(d.train.class_names.empty());
  EXPECT_EQ(d.test.samples(), 0);
  EXPECT_EQ(d.train.feature_names[0], "age");
  EXPECT_EQ(d.train.feature_names[9], "s6");
  EXPECT_EQ(d.train.X(0, 0), 59.0);
  EXPECT_EQ(d.train.X(0, 2), 32.1);
  EXPECT_EQ(d.train.y[0], 151.0);
  double sum = 0;
  for (double v : d.train.y) sum += v;
  EXPECT_NEAR(sum / 442.0, 152.133484, 1e-6);
  EXPECT_EQ(*std::min_element(d.train.y.begin(), d.train.y.end()), 25.0);
  EXPECT_EQ(*std::max_element(d.train.y.begin(), d.train.y.end()), 346.0);
  // Standardised by default: every feature column has mean 0.
  const TrainTest s = load_dataset("diabetes", shared_opts());
  for (index_t j = 0; j < 10; ++j) {
    double m = 0;
    for (index_t i = 0; i < 442; ++i) m += s.train.X(i, j);
    EXPECT_NEAR(m / 442.0, 0.0, 1e-12) << j;
  }
}

TEST(Datasets, ChecksumsOfAllRealFilesVerify) {
  REQUIRE_SHARED("SHA256SUMS");
  for (const auto& name : dataset_names()) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(verify_checksums(kShared, dataset_files(name)));
  }
  LoadOptions o = shared_opts();
  o.verify_checksums = true;
  EXPECT_EQ(load_dataset("heart-disease", o).train.samples(), 297);
}

TEST(Datasets, ChecksumFailsOnModifiedCopy) {
  REQUIRE_SHARED("pima-diabetes");
  TempDir dir;
  const std::string rel = "pima-diabetes/pima-indians-diabetes.csv";
  std::string csv = read_bytes(kShared + "/" + rel);
  write_bytes(dir.file(rel), csv);
  std::string sums;
  {
    std::ifstream in(kShared + "/SHA256SUMS");
    for (std::string line; std::getline(in, line);)
      if (line.find(rel) != std::string::npos) sums += line + "\n";
  }
  ASSERT_FALSE(sums.empty());
  write_bytes(dir.file("SHA256SUMS"), sums);  // not needed: the digests are dcalign's own
  LoadOptions o;
  o.data_dir = dir.str();
  o.standardize = false;
  EXPECT_TRUE(o.verify_checksums) << "verified by default";
  EXPECT_EQ(load_dataset("pima-diabetes", o).train.samples(), 768);
  // One digit changed: still a well-formed file, which only the checksum can tell apart.
  const size_t pos = csv.find("148");
  ASSERT_NE(pos, std::string::npos);
  csv[pos] = '2';
  write_bytes(dir.file(rel), csv);
  expect_error([&] { load_dataset("pima-diabetes", o); }, {"checksum mismatch", dir.file(rel)});
  o.verify_checksums = false;
  EXPECT_EQ(load_dataset("pima-diabetes", o).train.X(0, 1), 248.0);
}

TEST(Datasets, SampleCountsWithoutFullLoad) {
  REQUIRE_SHARED("mnist");
  const SampleCounts m = sample_counts("mnist", shared_opts());
  EXPECT_EQ(m.train, 60000);
  EXPECT_EQ(m.test, 10000);
  const SampleCounts a = sample_counts("adult", shared_opts());
  EXPECT_EQ(a.train, 30162);
  EXPECT_EQ(a.test, 15060);
  EXPECT_EQ(sample_counts("german-credit", shared_opts()).train, 1000);
}

// ---------------------------------------------------------------------------------------------
// Synthetic files: run everywhere

TEST(Datasets, NamesAndUnknownName) {
  const auto names = dataset_names();
  EXPECT_EQ(names.size(), 11u);
  for (const auto& n : names) EXPECT_FALSE(dataset_files(n).empty()) << n;
  try {
    load_dataset("mnsit");
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("'mnsit'"));
    for (const auto& n : names) EXPECT_THAT(e.what(), HasSubstr(n));
  }
  EXPECT_THROW(dataset_files("iris"), InvalidInput);
  EXPECT_THROW(sample_counts("iris"), InvalidInput);
}

TEST(Datasets, MissingDataDirectoryNamesFileAndRemedy) {
  TempDir dir;
  LoadOptions o;
  o.data_dir = dir.file("nowhere");
  expect_error([&] { load_dataset("german-credit", o); },
               {dir.file("nowhere") + "/german-credit/german.csv", "no such file", "DCALIGN_DATA"});
}

TEST(Datasets, SyntheticMnistLoadsScaledAndChecksCounts) {
  TempDir dir;
  // 3 images whose pixel k is k mod 256, and labels 7, 0, 9.
  std::string img = be32(2051) + be32(3) + be32(28) + be32(28);
  for (int k = 0; k < 3 * 784; ++k) img += static_cast<char>(k % 256);
  const std::string lab = be32(2049) + be32(3) + std::string("\x07\x00\x09", 3);
  for (const char* part : {"train", "t10k"}) {
    write_gz(dir.file(std::string("mnist/") + part + "-images-idx3-ubyte.gz"), img);
    write_gz(dir.file(std::string("mnist/") + part + "-labels-idx1-ubyte.gz"), lab);
  }
  LoadOptions o;
  o.data_dir = dir.str();
  o.verify_checksums = false;  // files written here, not the official ones
  const TrainTest tt = load_dataset("mnist", o);
  ASSERT_EQ(tt.train.samples(), 3);
  EXPECT_EQ(tt.test.samples(), 3);
  EXPECT_EQ(tt.train.y, (std::vector<double>{7, 0, 9}));
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 784; ++j)
      ASSERT_EQ(tt.train.X(i, j), ((i * 784 + j) % 256) / 255.0) << i << ", " << j;

  // Label file with one label fewer than images.
  write_gz(dir.file("mnist/t10k-labels-idx1-ubyte.gz"),
           be32(2049) + be32(2) + std::string("\x07\x00", 2));
  expect_error([&] { load_dataset("mnist", o); },
               {dir.file("mnist/t10k-images-idx3-ubyte.gz"), "3 images",
                dir.file("mnist/t10k-labels-idx1-ubyte.gz"), "2 labels"});
  expect_error([&] { sample_counts("mnist", o); }, {"3 images", "2 labels"});
  // A label outside 0..9.
  write_gz(dir.file("mnist/t10k-labels-idx1-ubyte.gz"),
           be32(2049) + be32(3) + std::string("\x07\x0a\x09", 3));
  expect_error([&] { load_dataset("mnist", o); },
               {dir.file("mnist/t10k-labels-idx1-ubyte.gz"), "label 10", "expected 0..9"});
  // Images that are not 28 x 28.
  write_gz(dir.file("mnist/train-images-idx3-ubyte.gz"),
           be32(2051) + be32(1) + be32(2) + be32(2) + std::string(4, '\0'));
  expect_error([&] { load_dataset("mnist", o); },
               {dir.file("mnist/train-images-idx3-ubyte.gz"), "2 x 2", "expected 28 x 28"});
}

TEST(Datasets, MalformedTabularFilesNameFileAndLine) {
  TempDir dir;
  LoadOptions o;
  o.data_dir = dir.str();
  o.verify_checksums = false;  // files written here, not the official ones
  const std::string pima = dir.file("pima-diabetes/pima-indians-diabetes.csv");
  write_bytes(pima,
              "6,148,72,35,0,33.6,0.627,50,1\n1,85,66,29,0,26.6,0.351,31,0\n"
              "8,183,64,0,abc,23.3,0.672,32,1\n");
  expect_error([&] { load_dataset("pima-diabetes", o); },
               {pima, "line 3", "field 5 (insulin)", "expected a finite number", "'abc'"});
  write_bytes(pima, "6,148,72,35,9,33.6,0.627,50,1\n1,85,66,29,9,26.6,0.351,31,2\n");
  expect_error([&] { load_dataset("pima-diabetes", o); },
               {pima, "line 2", "outcome", "expected an integer in 0..1, found 2"});
  // Pima has no missing-value token: a '?' is an error, not a silently dropped row.
  write_bytes(pima, "6,148,72,35,9,33.6,0.627,50,1\n1,?,66,29,9,26.6,0.351,31,0\n");
  expect_error([&] { load_dataset("pima-diabetes", o); }, {pima, "line 2", "'?'"});

  const std::string german = dir.file("german-credit/german.csv");
  write_bytes(german,
              "A11,6,A34,A43,1169,A65,A75,4,A93,A101,4,A121,67,A143,A152,2,A173,1,A192,A201,1\n"
              "A12,48,A32,A43,5951,A61,A73,2,A92,A101,2,A121,22,A143,A152,1,A173,1,A191,A201\n");
  expect_error([&] { load_dataset("german-credit", o); },
               {german, "line 2", "expected 21 fields, found 20"});

  const std::string adult_train = dir.file("adult/adult.data");
  const std::string adult_test = dir.file("adult/adult.test");
  const std::string row =
      "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
      "Male, 2174, 0, 40, United-States, ";
  write_bytes(adult_train, row + "<=50K\n" + row + ">50K\n\n");
  write_bytes(adult_test, "|1x3 Cross validator\n" + row + "<=50K.\n" + row + "maybe\n");
  expect_error([&] { load_dataset("adult", o); },
               {adult_test, "line 3", "income", "expected '<=50K' or '>50K'", "'maybe'"});
  write_bytes(adult_test, "|1x3 Cross validator\n" + row + ">50K.\n");
  const TrainTest adult = load_dataset("adult", o);
  EXPECT_EQ(adult.train.y, (std::vector<double>{0, 1}));
  EXPECT_EQ(adult.test.y, (std::vector<double>{1}));
  EXPECT_EQ(adult.train.features(), 6 + 8);  // one category per field in this tiny file

  const std::string bc = dir.file("sklearn/breast_cancer.csv");
  std::string line = "1";
  for (int k = 1; k < 30; ++k) line += ",1";
  write_bytes(bc, "3,30,malignant,benign\n" + line + ",0\n" + line + ",1\n");
  expect_error([&] { load_dataset("breast-cancer", o); },
               {bc, "line 1", "'3,30,malignant,benign'", "2 data rows"});
}

TEST(Datasets, EnvironmentVariableSelectsDataDirectory) {
  TempDir dir;
  write_bytes(dir.file("heart-disease/processed.cleveland.data"),
              "63.0,1.0,1.0,145.0,233.0,1.0,2.0,150.0,0.0,2.3,3.0,0.0,6.0,0\n"
              "67.0,1.0,4.0,160.0,286.0,0.0,2.0,108.0,1.0,1.5,2.0,3.0,?,2\n"
              "67.0,1.0,4.0,120.0,229.0,0.0,2.0,129.0,1.0,2.6,2.0,2.0,7.0,1\n");
  ::setenv("DCALIGN_DATA", dir.str().c_str(), 1);
  LoadOptions o;
  o.standardize = false;
  o.verify_checksums = false;  // rows written here, not the official file
  const TrainTest tt = load_dataset("heart-disease", o);
  ::unsetenv("DCALIGN_DATA");
  ASSERT_EQ(tt.train.samples(), 2);  // the row with '?' is dropped
  EXPECT_EQ(tt.train.y, (std::vector<double>{0, 1}));
  EXPECT_EQ(tt.train.X(1, 0), 67.0);
}

// ---------------------------------------------------------------------------------------------
// Paper 004's coding: one-hot without the first level, and Heart disease's ca as a category

namespace {

// The feature names of a full one-hot coding without the first "<column>=" name of each
// one-hot column: what drop-first must give.
std::vector<std::string> without_first_levels(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::string previous;
  for (const auto& n : names) {
    const auto eq = n.find('=');
    const std::string column = eq == std::string::npos ? "" : n.substr(0, eq);
    if (!column.empty() && column != previous) {
      previous = column;
      continue;  // the first level of a new one-hot column
    }
    previous = column;
    out.push_back(n);
  }
  return out;
}

// The column of X named `name`; fails the test when there is none.
index_t column_named(const Dataset& d, const std::string& name) {
  const auto it = std::find(d.feature_names.begin(), d.feature_names.end(), name);
  EXPECT_NE(it, d.feature_names.end()) << name;
  return static_cast<index_t>(it - d.feature_names.begin());
}

}  // namespace

TEST(Datasets, DropFirstLeavesOutTheFirstLevelOfEachCategoricalColumn) {
  REQUIRE_SHARED("german-credit");
  LoadOptions o = shared_opts(false);
  const Dataset full = load_dataset("german-credit", o).train;
  o.onehot = OneHotCoding::drop_first;
  const Dataset drop = load_dataset("german-credit", o).train;
  // 61 columns, 13 of them categorical: 48 remain (7 numeric + 54 - 13 indicators).
  ASSERT_EQ(drop.features(), 48);
  EXPECT_EQ(drop.feature_names, without_first_levels(full.feature_names));
  EXPECT_EQ(drop.feature_names[0], "checking_status=A12");  // A11, the first code, is gone
  EXPECT_EQ(std::count(drop.feature_names.begin(), drop.feature_names.end(), "checking_status=A11"),
            0);
  // Every remaining column holds the same values as under the full coding; a row of the first
  // level is all zeros in its column's indicators (row 0 has checking_status A11).
  for (index_t j = 0; j < drop.features(); ++j) {
    const index_t f = column_named(full, drop.feature_names[static_cast<size_t>(j)]);
    for (index_t i = 0; i < drop.samples(); ++i) ASSERT_EQ(drop.X(i, j), full.X(i, f)) << i << j;
  }
  for (const char* level : {"checking_status=A12", "checking_status=A13", "checking_status=A14"})
    EXPECT_EQ(drop.X(0, column_named(drop, level)), 0.0) << level;
  EXPECT_EQ(drop.y, full.y);
  EXPECT_EQ(drop.continuous_columns.size(), 7u);
  for (index_t c : drop.continuous_columns)
    EXPECT_EQ(drop.feature_names[static_cast<size_t>(c)].find('='), std::string::npos);
  // Standardised, the continuous columns have mean 0 and deviation 1; indicators stay 0/1.
  o.standardize = true;
  const Dataset st = load_dataset("german-credit", o).train;
  for (index_t c : st.continuous_columns) {
    const auto [m, sd] = column_stats(st.X, c);
    EXPECT_NEAR(m, 0.0, 1e-9);
    EXPECT_NEAR(sd, 1.0, 1e-9);
  }
  EXPECT_EQ(st.X(0, 0), 0.0);
  // Pima has no categorical column: drop-first changes nothing.
  REQUIRE_SHARED("pima-diabetes");
  o = shared_opts();
  const Dataset pima = load_dataset("pima-diabetes", o).train;
  o.onehot = OneHotCoding::drop_first;
  EXPECT_EQ(load_dataset("pima-diabetes", o).train.X.values(), pima.X.values());
}

TEST(Datasets, HeartPaper004CodingHasTwentyFeatures) {
  REQUIRE_SHARED("heart-disease");
  // m from the file itself: 5 continuous + 3 binary + (levels - 1) of cp, restecg, slope, ca and
  // thal among the complete rows (read here without the loader).
  std::ifstream in(kShared + "/heart-disease/processed.cleveland.data");
  std::map<int, std::set<std::string>> levels;
  std::string line;
  index_t complete = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line.find('?') != std::string::npos) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 14u) << line;
    for (int c : {2, 6, 10, 11, 12}) levels[c].insert(cells[static_cast<size_t>(c)]);
    ++complete;
  }
  index_t m = 5 + 3;
  for (const auto& [c, lv] : levels) m += static_cast<index_t>(lv.size()) - 1;
  EXPECT_EQ(m, 20);  // notes-wave2 section 2.3: the Cleveland coding gives m = 20

  LoadOptions o = shared_opts();
  o.onehot = OneHotCoding::drop_first;
  o.heart_ca_categorical = true;
  const Dataset d = load_dataset("heart-disease", o).train;
  ASSERT_EQ(d.samples(), complete);
  EXPECT_EQ(d.features(), m);
  EXPECT_EQ(d.feature_names,
            (std::vector<std::string>{"age",      "sex",   "cp=2",    "cp=3",      "cp=4",
                                      "trestbps", "chol",  "fbs",     "restecg=1", "restecg=2",
                                      "thalach",  "exang", "oldpeak", "slope=2",   "slope=3",
                                      "ca=1",     "ca=2",  "ca=3",    "thal=6",    "thal=7"}));
  // Standardised: the five numeric columns only.
  ASSERT_EQ(d.continuous_columns, (std::vector<index_t>{0, 5, 6, 10, 12}));
  for (index_t c : d.continuous_columns) {
    const auto [mean, sd] = column_stats(d.X, c);
    EXPECT_NEAR(mean, 0.0, 1e-9);
    EXPECT_NEAR(sd, 1.0, 1e-9);
  }
  // Row 0: cp 1, restecg 2, slope 3, ca 0, thal 6 (first levels encode as zeros).
  for (index_t j = 2; j <= 4; ++j) EXPECT_EQ(d.X(0, j), 0.0);
  EXPECT_EQ(d.X(0, column_named(d, "restecg=2")), 1.0);
  EXPECT_EQ(d.X(0, column_named(d, "slope=3")), 1.0);
  for (const char* z : {"ca=1", "ca=2", "ca=3", "thal=7"})
    EXPECT_EQ(d.X(0, column_named(d, z)), 0.0);
  EXPECT_EQ(d.X(0, column_named(d, "thal=6")), 1.0);
  // Row 1: ca 3.
  EXPECT_EQ(d.X(1, column_named(d, "ca=3")), 1.0);
  // ca categorical under the full coding: 22 - 1 continuous + 4 levels.
  o.onehot = OneHotCoding::full;
  EXPECT_EQ(load_dataset("heart-disease", o).train.features(), 25);
  // The default coding is unchanged (ca continuous, every level kept).
  EXPECT_EQ(load_dataset("heart-disease", shared_opts()).train.features(), 22);
}

TEST(Datasets, OneHotCodingOptionsAreChecked) {
  EXPECT_EQ(parse_onehot_coding("full"), OneHotCoding::full);
  EXPECT_EQ(parse_onehot_coding("drop-first"), OneHotCoding::drop_first);
  try {
    parse_onehot_coding("drop_first");
    ADD_FAILURE() << "no exception";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("'drop_first'"));
    EXPECT_THAT(e.what(), HasSubstr("\"drop-first\""));
  }
  // ca belongs to Heart disease: asked of another dataset, the loader refuses before reading.
  LoadOptions o;
  o.data_dir = "/nonexistent";
  o.heart_ca_categorical = true;
  try {
    load_dataset("german-credit", o);
    ADD_FAILURE() << "no exception";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("heart_ca_categorical"));
    EXPECT_THAT(e.what(), HasSubstr("'german-credit'"));
  }
}

// The same coding on a small file written here, so that it is checked without the shared data.
TEST(Datasets, HeartDropFirstOnAWrittenFile) {
  TempDir dir;
  write_bytes(dir.file("heart-disease/processed.cleveland.data"),
              "63.0,1.0,4.0,145.0,233.0,1.0,2.0,150.0,0.0,2.3,3.0,2.0,6.0,0\n"
              "67.0,1.0,3.0,160.0,286.0,0.0,2.0,108.0,1.0,1.5,2.0,1.0,7.0,2\n"
              "41.0,0.0,1.0,130.0,204.0,0.0,0.0,172.0,0.0,1.4,1.0,0.0,3.0,0\n");
  LoadOptions o;
  o.data_dir = dir.str();
  o.verify_checksums = false;  // files written here, not the official ones
  o.standardize = false;
  o.onehot = OneHotCoding::drop_first;
  o.heart_ca_categorical = true;
  const Dataset d = load_dataset("heart-disease", o).train;
  // cp {1, 3, 4}, restecg {0, 2}, slope {1, 2, 3}, ca {0, 1, 2}, thal {3, 6, 7}: one column
  // fewer each than levels.
  EXPECT_EQ(d.feature_names,
            (std::vector<std::string>{"age", "sex", "cp=3", "cp=4", "trestbps", "chol", "fbs",
                                      "restecg=2", "thalach", "exang", "oldpeak", "slope=2",
                                      "slope=3", "ca=1", "ca=2", "thal=6", "thal=7"}));
  ASSERT_EQ(d.samples(), 3);
  // Row 2 holds the first level of every categorical column: all its indicators are zero.
  for (index_t j = 0; j < d.features(); ++j) {
    const std::string& n = d.feature_names[static_cast<size_t>(j)];
    if (n.find('=') != std::string::npos) {
      EXPECT_EQ(d.X(2, j), 0.0) << n;
    }
  }
  EXPECT_EQ(d.X(0, 3), 1.0);   // cp=4
  EXPECT_EQ(d.X(1, 2), 1.0);   // cp=3
  EXPECT_EQ(d.X(0, 14), 1.0);  // ca=2
  EXPECT_EQ(d.X(1, 13), 1.0);  // ca=1
  EXPECT_EQ(d.X(1, 14), 0.0);
}
