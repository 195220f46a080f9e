// Readers on files written into a temporary directory: valid IDX and CSV files round-trip,
// malformed ones throw IoError naming the file (and line) and what was expected. Also the
// SHA-256 checksum verification and the data-directory resolution.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/alloc_tracker.hpp"
#include "data/file_util.hpp"
#include "dcalign/data.hpp"

namespace fs = std::filesystem;
using namespace dcalign;
using namespace dcalign::data;
using ::testing::HasSubstr;

namespace {

using dcalign::testing::AllocationTracker;
using dcalign::testing::be32;
using dcalign::testing::expect_io_error;
using dcalign::testing::read_bytes;
using dcalign::testing::TempDir;
using dcalign::testing::write_bytes;
using dcalign::testing::write_gz;

// An IDX image file body: header declaring `declared` images of r x c, then `actual` images
// whose pixel k is (k * 7) mod 256, so every position has a distinct known value.
std::string idx_images(std::uint32_t magic, std::uint32_t declared, std::uint32_t actual,
                       std::uint32_t r, std::uint32_t c) {
  std::string s = be32(magic) + be32(declared) + be32(r) + be32(c);
  for (std::uint32_t k = 0; k < actual * r * c; ++k) s += static_cast<char>((k * 7) % 256);
  return s;
}

std::string idx_labels(std::uint32_t declared, std::uint32_t actual) {
  std::string s = be32(2049) + be32(declared);
  for (std::uint32_t k = 0; k < actual; ++k) s += static_cast<char>(k % 10);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// IDX

TEST(DataIdx, ImagesAndLabelsRoundTripCompressedAndPlain) {
  TempDir dir;
  const std::string body = idx_images(2051, 3, 3, 2, 5);
  write_gz(dir.file("img.gz"), body);
  write_bytes(dir.file("img.raw"), body);
  for (const auto* name : {"img.gz", "img.raw"}) {
    const IdxImages img = read_idx_images(dir.file(name));
    EXPECT_EQ(img.count, 3);
    EXPECT_EQ(img.rows, 2);
    EXPECT_EQ(img.cols, 5);
    ASSERT_EQ(img.pixels.size(), 30u);
    for (std::uint32_t k = 0; k < 30; ++k) EXPECT_EQ(img.pixels[k], (k * 7) % 256) << k;
  }
  write_gz(dir.file("lab.gz"), idx_labels(25, 25));
  const auto labels = read_idx_labels(dir.file("lab.gz"));
  ASSERT_EQ(labels.size(), 25u);
  for (size_t k = 0; k < 25; ++k) EXPECT_EQ(labels[k], k % 10);
  EXPECT_EQ(read_idx_dims(dir.file("img.gz")), (std::vector<index_t>{3, 2, 5}));
  EXPECT_EQ(read_idx_dims(dir.file("lab.gz")), (std::vector<index_t>{25}));
}

TEST(DataIdx, TruncatedGzipThrows) {
  TempDir dir;
  // Incompressible-ish content so that the compressed stream is long enough to cut.
  std::string body = be32(2049) + be32(5000);
  std::uint32_t x = 12345;
  for (int k = 0; k < 5000; ++k) {
    x = x * 1103515245u + 12345u;
    body += static_cast<char>(x >> 24);
  }
  write_gz(dir.file("full.gz"), body);
  const std::string gz = read_bytes(dir.file("full.gz"));
  ASSERT_GT(gz.size(), 1000u);
  // Cut in the middle of the deflate data ...
  write_bytes(dir.file("half.gz"), gz.substr(0, gz.size() / 2));
  expect_io_error([&] { read_idx_labels(dir.file("half.gz")); },
                  {dir.file("half.gz"), "truncated"});
  // ... and inside the 8-byte trailer only: all data decompress, but the stream is incomplete.
  write_bytes(dir.file("trailer.gz"), gz.substr(0, gz.size() - 3));
  expect_io_error([&] { read_idx_labels(dir.file("trailer.gz")); },
                  {dir.file("trailer.gz"), "truncated"});
  EXPECT_EQ(read_idx_labels(dir.file("full.gz")).size(), 5000u);
}

TEST(DataIdx, CorruptGzipDataThrows) {
  TempDir dir;
  write_gz(dir.file("ok.gz"), idx_labels(3000, 3000));
  std::string gz = read_bytes(dir.file("ok.gz"));
  gz[gz.size() - 6] ^= 0x55;  // a CRC byte of the trailer: data decompress but do not match
  write_bytes(dir.file("crc.gz"), gz);
  expect_io_error([&] { read_idx_labels(dir.file("crc.gz")); }, {dir.file("crc.gz"), "corrupt"});
}

TEST(DataIdx, BadMagicThrows) {
  TempDir dir;
  write_gz(dir.file("labels-as-images.gz"), idx_labels(10, 10));
  expect_io_error([&] { read_idx_images(dir.file("labels-as-images.gz")); },
                  {dir.file("labels-as-images.gz"), "bad IDX magic number 2049", "expected 2051"});
  write_gz(dir.file("images-as-labels.gz"), idx_images(2051, 1, 1, 2, 2));
  expect_io_error([&] { read_idx_labels(dir.file("images-as-labels.gz")); },
                  {dir.file("images-as-labels.gz"), "2051", "expected 2049"});
  write_gz(dir.file("junk.gz"), "not an idx file at all");
  expect_io_error([&] { read_idx_dims(dir.file("junk.gz")); },
                  {dir.file("junk.gz"), "bad IDX magic number"});
}

TEST(DataIdx, WrongCountThrows) {
  TempDir dir;
  // The header declares more images than the file holds.
  write_gz(dir.file("short.gz"), idx_images(2051, 10, 9, 28, 28));
  expect_io_error([&] { read_idx_images(dir.file("short.gz")); },
                  {dir.file("short.gz"), "expected 7840 bytes", "found 7056", "10 images"});
  // The header declares fewer images than the file holds.
  write_gz(dir.file("long.gz"), idx_images(2051, 9, 10, 28, 28));
  expect_io_error([&] { read_idx_images(dir.file("long.gz")); },
                  {dir.file("long.gz"), "unexpected data after 9 images"});
  write_gz(dir.file("labels.gz"), idx_labels(100, 99));
  expect_io_error([&] { read_idx_labels(dir.file("labels.gz")); },
                  {dir.file("labels.gz"), "expected 100 bytes", "found 99"});
  // A header cut inside the dimensions.
  write_gz(dir.file("header.gz"), be32(2051) + be32(1) + "\x00\x00");
  expect_io_error([&] { read_idx_images(dir.file("header.gz")); },
                  {dir.file("header.gz"), "IDX dimension 1"});
}

// A tiny file whose header declares enormous sizes is rejected from the header, or when the data
// run out, without allocating for what it declares (the largest allocation stays below 1 MiB:
// the payload buffer grows from 64 KiB only as bytes arrive).
TEST(DataIdx, EnormousDeclaredSizesAreRejectedWithoutAllocating) {
  TempDir dir;
  const auto expect_small = [](const std::function<void()>& read,
                               const std::vector<std::string>& phrases) {
    AllocationTracker tracker;
    expect_io_error(read, phrases);
    EXPECT_LT(tracker.largest(), std::size_t{1} << 20);
  };
  // No image at all, but images of 2^20 x 2^20 pixels.
  write_bytes(dir.file("empty.raw"), be32(2051) + be32(0) + be32(1u << 20) + be32(1u << 20));
  expect_small([&] { read_idx_images(dir.file("empty.raw")); },
               {dir.file("empty.raw"), "implausible size", "0 images of 1048576 x 1048576",
                "at most 16777216 pixels per image"});
  // Dimensions whose product does not fit 64 bits.
  write_bytes(dir.file("wide.raw"),
              be32(2051) + be32(0xffffffffu) + be32(0xffffffffu) + be32(0xffffffffu));
  expect_small([&] { read_idx_images(dir.file("wide.raw")); },
               {dir.file("wide.raw"), "implausible size", "does not fit"});
  // A plausible header (2^20 images of 28 x 28, 822 MB) on a file of a few bytes.
  write_gz(dir.file("many.gz"), idx_images(2051, 1u << 20, 1, 28, 28));
  expect_small([&] { read_idx_images(dir.file("many.gz")); },
               {dir.file("many.gz"), "file ends early", "expected 822083584 bytes", "found 784"});
  write_gz(dir.file("labels.gz"), idx_labels(0xffffffffu, 5));
  expect_small([&] { read_idx_labels(dir.file("labels.gz")); },
               {dir.file("labels.gz"), "file ends early", "expected 4294967295 bytes", "found 5"});
}

TEST(DataIdx, MissingFileThrows) {
  TempDir dir;
  expect_io_error([&] { read_idx_images(dir.file("nope.gz")); },
                  {dir.file("nope.gz"), "no such file"});
}

// ---------------------------------------------------------------------------------------------
// CSV

TEST(DataCsv, ParsesTypedColumnsQuotesMissingAndLineEnds) {
  const std::vector<CsvColumn> cols = {{"id", ColumnType::numeric},
                                       {"name", ColumnType::categorical},
                                       {"skip", ColumnType::ignore},
                                       {"score", ColumnType::numeric}};
  CsvOptions opts;
  opts.header_lines = 1;
  opts.missing_tokens = {"?"};
  const std::string text =
      "id,name,skip,score\r\n"
      "1, plain ,x,2.5\r\n"
      "\n"
      "  \n"
      "+2,\"quoted, with comma\",y,-1e3\n"
      "3,\"say \"\"hi\"\"\" , z ,?\n"
      "4,?,,7";  // no newline at the end; an empty ignored field is fine
  const CsvTable t = parse_csv(text, "mem.csv", cols, opts);
  ASSERT_EQ(t.rows, 4);
  EXPECT_EQ(t.header, (std::vector<std::string>{"id,name,skip,score"}));
  EXPECT_EQ(t.numbers[0], (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(t.strings[1],
            (std::vector<std::string>{"plain", "quoted, with comma", "say \"hi\"", ""}));
  EXPECT_TRUE(t.numbers[2].empty());
  EXPECT_TRUE(t.strings[2].empty());
  EXPECT_EQ(t.numbers[3][0], 2.5);
  EXPECT_EQ(t.numbers[3][1], -1000.0);
  EXPECT_TRUE(std::isnan(t.numbers[3][2]));
  EXPECT_EQ(t.numbers[3][3], 7.0);
  EXPECT_EQ(t.lines, (std::vector<index_t>{2, 5, 6, 7}));
  EXPECT_FALSE(t.row_has_missing(0));
  EXPECT_TRUE(t.missing(2, 3));
  EXPECT_TRUE(t.missing(3, 1));
  EXPECT_FALSE(t.missing(3, 3));
  EXPECT_TRUE(t.row_has_missing(2));
}

TEST(DataCsv, BadNumericCellThrowsWithFileLineAndColumn) {
  TempDir dir;
  const std::vector<CsvColumn> cols = {{"a", ColumnType::numeric}, {"age", ColumnType::numeric}};
  write_bytes(dir.file("bad.csv"), "1,2\n3,4\n5,abc\n");
  expect_io_error(
      [&] { read_csv(dir.file("bad.csv"), cols); },
      {dir.file("bad.csv"), "line 3", "field 2 (age)", "expected a finite number", "'abc'"});
  // Without missing tokens, '?' is not a number either; nor are inf, nan, "1.5x" or "".
  for (const std::string cell : {"?", "inf", "nan", "1.5x", "", "1e999"}) {
    write_bytes(dir.file("cell.csv"), "1,2\n" + cell + ",4\n");
    expect_io_error([&] { read_csv(dir.file("cell.csv"), cols); },
                    {dir.file("cell.csv"), "line 2", "field 1 (a)"});
  }
}

TEST(DataCsv, WrongColumnCountThrowsWithLine) {
  TempDir dir;
  const std::vector<CsvColumn> cols = {
      {"a", ColumnType::numeric}, {"b", ColumnType::numeric}, {"c", ColumnType::categorical}};
  write_bytes(dir.file("short.csv"), "1,2,x\n1,2\n");
  expect_io_error([&] { read_csv(dir.file("short.csv"), cols); },
                  {dir.file("short.csv"), "line 2", "expected 3 fields, found 2"});
  write_bytes(dir.file("long.csv"), "1,2,x\n\n1,2,x,\n");
  expect_io_error([&] { read_csv(dir.file("long.csv"), cols); },
                  {dir.file("long.csv"), "line 3", "expected 3 fields, found 4"});
  write_bytes(dir.file("quote.csv"), "1,2,\"open\n");
  expect_io_error([&] { read_csv(dir.file("quote.csv"), cols); },
                  {dir.file("quote.csv"), "line 1", "unterminated quoted field"});
  write_bytes(dir.file("after.csv"), "1,2,\"x\"y\n");
  expect_io_error([&] { read_csv(dir.file("after.csv"), cols); },
                  {dir.file("after.csv"), "line 1", "after a closing quote"});
}

TEST(DataCsv, ReadsGzipCompressedFiles) {
  TempDir dir;
  write_gz(dir.file("t.csv.gz"), "1,2\n3,4\n");
  const CsvTable t =
      read_csv(dir.file("t.csv.gz"), {{"a", ColumnType::numeric}, {"b", ColumnType::numeric}});
  EXPECT_EQ(t.rows, 2);
  EXPECT_EQ(t.numbers[1], (std::vector<double>{2, 4}));
}

// ---------------------------------------------------------------------------------------------
// Checksums and the data directory

// The breast-cancer file's first line declares its row count: it is compared with the rows read,
// never used to size anything, so an absurd count is an error naming the file and line.
TEST(DataCsv, DeclaredCountsAreCheckedNotTrusted) {
  TempDir dir;
  std::string row;
  for (int j = 0; j < 30; ++j) row += std::to_string(j + 1) + ",";
  write_bytes(dir.file("sklearn/breast_cancer.csv"),
              "99999999999999999999,30,malignant,benign\n" + row + "0\n");
  LoadOptions opts;
  opts.data_dir = dir.str();
  opts.verify_checksums = false;  // files written here, not the official ones
  AllocationTracker tracker;
  expect_io_error(
      [&] { load_dataset("breast-cancer", opts); },
      {dir.file("sklearn/breast_cancer.csv"), "line 1",
       "declares '99999999999999999999,30,malignant,benign'", "expected '1,30,<class names>'"});
  EXPECT_LT(tracker.largest(), std::size_t{1} << 20);
}

// Values near the largest double are finite, so the readers accept them; the statistics built on
// them must not overflow to inf and turn the dataset into NaN (found by fuzzing the pima loader:
// its mean imputation and the standardisation summed 1e308 + 1e308).
TEST(DataStandardize, ValuesNearTheLargestDoubleStayFinite) {
  Matrix<double> X(2, 2);
  X(0, 0) = 1e308;
  X(1, 0) = -1e308;
  X(0, 1) = 1.7e308;
  X(1, 1) = 1.7e308;
  const Standardizer s = Standardizer::fit(X, {0, 1});
  EXPECT_EQ(s.mean[0], 0.0);
  EXPECT_EQ(s.sd[0], 1e308);
  EXPECT_EQ(s.mean[1], 1.7e308);
  EXPECT_EQ(s.sd[1], 1.0);  // constant column
  s.apply(X);
  EXPECT_EQ(X(0, 0), 1.0);
  EXPECT_EQ(X(1, 0), -1.0);
  EXPECT_EQ(X(0, 1), 0.0);
  // The widest spread a double allows still has a finite deviation.
  Matrix<double> wide(2, 1);
  wide(0, 0) = 1.7e308;
  wide(1, 0) = -1.7e308;
  const Standardizer w = Standardizer::fit(wide, {0});
  EXPECT_EQ(w.sd[0], 1.7e308);
  w.apply(wide);
  EXPECT_EQ(wide(0, 0), 1.0);
  // A value whose standardised form is beyond the double range (far outside the fitted data):
  // an error, not inf.
  Matrix<double> small(2, 1);
  small(0, 0) = 1.0;
  small(1, 0) = 2.0;
  const Standardizer f = Standardizer::fit(small, {0});
  small(0, 0) = 1.5e308;
  EXPECT_THROW(f.apply(small), InvalidInput);

  TempDir dir;
  std::string rows;
  for (const char* v : {"1e308", "1.5e308"}) {
    for (int j = 0; j < 8; ++j) rows += std::string(v) + ",";
    rows += "1\n";
  }
  write_bytes(dir.file("pima-diabetes/pima-indians-diabetes.csv"), rows);
  LoadOptions opts;
  opts.data_dir = dir.str();
  opts.verify_checksums = false;  // files written here, not the official ones
  for (const bool standardize : {false, true}) {
    opts.standardize = standardize;
    const TrainTest tt = load_dataset("pima-diabetes", opts);
    ASSERT_EQ(tt.train.samples(), 2);
    for (index_t k = 0; k < tt.train.X.size(); ++k)
      EXPECT_TRUE(std::isfinite(tt.train.X.data()[k])) << "entry " << k;
  }
}

TEST(DataChecksum, Sha256OfKnownContent) {
  TempDir dir;
  write_bytes(dir.file("abc"), "abc");
  // FIPS 180-2, appendix B.1.
  EXPECT_EQ(sha256_file(dir.file("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  write_bytes(dir.file("empty"), "");
  EXPECT_EQ(sha256_file(dir.file("empty")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(DataChecksum, VerifyPassesOnMatchAndFailsOnModifiedMissingOrUnlisted) {
  TempDir dir;
  write_bytes(dir.file("sub/a.txt"), "abc");
  write_bytes(dir.file("b.txt"), "other");
  write_bytes(dir.file("SHA256SUMS"),
              "# comment\n"
              "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD  sub/a.txt\n");
  EXPECT_NO_THROW(verify_checksums(dir.str(), {"sub/a.txt"}));
  expect_io_error([&] { verify_checksums(dir.str(), {"b.txt"}); },
                  {"SHA256SUMS", "no entry", "b.txt"});
  write_bytes(dir.file("sub/a.txt"), "abd");
  expect_io_error([&] { verify_checksums(dir.str(), {"sub/a.txt"}); },
                  {"checksum mismatch", dir.file("sub/a.txt"), "ba7816bf"});
  fs::remove(dir.file("sub/a.txt"));
  expect_io_error([&] { verify_checksums(dir.str(), {"sub/a.txt"}); },
                  {dir.file("sub/a.txt"), "no such file"});
  fs::remove(dir.file("SHA256SUMS"));
  expect_io_error([&] { verify_checksums(dir.str(), {"b.txt"}); }, {"SHA256SUMS", "no such file"});
  write_bytes(dir.file("SHA256SUMS"), "deadbeef  b.txt\n");
  expect_io_error([&] { verify_checksums(dir.str(), {"b.txt"}); }, {"SHA256SUMS", "line 1"});
}

TEST(DataDir, ExplicitThenEnvironmentThenCompiledDefault) {
  ::unsetenv("DCALIGN_DATA");
  EXPECT_EQ(resolve_data_dir(""), default_data_dir());
  EXPECT_TRUE(fs::path(default_data_dir()).is_absolute()) << default_data_dir();
  EXPECT_EQ(fs::path(default_data_dir()).filename(), "datasets");
  ::setenv("DCALIGN_DATA", "/from/env", 1);
  EXPECT_EQ(resolve_data_dir(""), "/from/env");
  EXPECT_EQ(resolve_data_dir("/explicit"), "/explicit");
  ::setenv("DCALIGN_DATA", "", 1);  // empty counts as unset
  EXPECT_EQ(resolve_data_dir(""), default_data_dir());
  ::unsetenv("DCALIGN_DATA");
}
