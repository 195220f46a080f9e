// libFuzzer target: the CSV reader (src/data/csv.cpp) and the tabular dataset loaders built on
// it (src/data/datasets.cpp). Input layout:
//   byte 0 < 0x80: parse_csv with options from bytes 0..3, the rest is the text:
//     byte 0: delimiter (bits 0-2: ',' ';' '\t' ' ' '|'), header lines (bits 3-4),
//             missing tokens (bits 5-6: none, "?", "" and "NA", "?" and "-")
//     byte 1: column count 1..8 (bits 0-2); bytes 2-3: two bits per column, the type
//             (numeric, categorical, ignore, numeric).
//     Text that starts with the gzip magic goes through read_csv from a file instead.
//   byte 0 >= 0x80: load_dataset of a tabular set ((byte 0 - 0x80) % 6: adult, pima-diabetes,
//     heart-disease, german-credit, digits, breast-cancer) from a scratch data directory
//     holding the rest of the input as its file(s); byte 1 bit 0: standardize.
// Each call either returns a consistent table or dataset or throws dcalign::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "dcalign/data.hpp"
#include "dcalign/error.hpp"
#include "fuzz_util.hpp"

namespace {

namespace fs = std::filesystem;
using dcalign::index_t;
using namespace dcalign::data;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_csv: invariant violated: %s\n", what);
    std::abort();
  }
}

void check_table(const CsvTable& t, std::size_t ncols) {
  check(t.rows >= 0 && t.lines.size() == static_cast<std::size_t>(t.rows), "lines != rows");
  check(t.missing_mask.size() == static_cast<std::size_t>(t.rows) * ncols, "mask size");
  for (std::size_t c = 0; c < ncols; ++c) {
    const ColumnType type = t.columns[c].type;
    check(
        t.numbers[c].size() == (type == ColumnType::numeric ? static_cast<std::size_t>(t.rows) : 0),
        "numeric column size");
    check(t.strings[c].size() ==
              (type == ColumnType::categorical ? static_cast<std::size_t>(t.rows) : 0),
          "categorical column size");
    for (std::size_t r = 0; r < t.numbers[c].size(); ++r)
      check(std::isfinite(t.numbers[c][r]) || t.missing_mask[r * ncols + c] != 0,
            "non-finite number that is not a missing cell");
  }
}

void check_dataset(const Dataset& d) {
  check(static_cast<index_t>(d.y.size()) == d.samples(), "labels != samples");
  check(static_cast<index_t>(d.feature_names.size()) == d.features(), "names != features");
  for (index_t i = 0; i < d.X.size(); ++i)
    check(std::isfinite(d.X.data()[i]), "non-finite feature value");
  for (const double y : d.y)
    check(y >= 0 && y < static_cast<double>(d.num_classes) && y == std::floor(y), "bad label");
}

void run_parse(dcalign::fuzz::Cursor& in) {
  static dcalign::fuzz::ScratchFile gz("csv", ".csv.gz");
  const std::uint8_t b0 = in.byte(), b1 = in.byte();
  const unsigned types = static_cast<unsigned>(in.byte()) | (unsigned{in.byte()} << 8);
  static const char delimiters[] = {',', ';', '\t', ' ', '|'};
  CsvOptions opts;
  opts.delimiter = delimiters[(b0 & 7) % 5];
  opts.header_lines = (b0 >> 3) & 3;
  switch ((b0 >> 5) & 3) {
    case 1:
      opts.missing_tokens = {"?"};
      break;
    case 2:
      opts.missing_tokens = {"", "NA"};
      break;
    case 3:
      opts.missing_tokens = {"?", "-"};
      break;
    default:
      break;
  }
  std::vector<CsvColumn> columns;
  const std::size_t ncols = 1 + (b1 & 7);
  for (std::size_t c = 0; c < ncols; ++c) {
    static const ColumnType kinds[] = {ColumnType::numeric, ColumnType::categorical,
                                       ColumnType::ignore, ColumnType::numeric};
    columns.push_back({"c" + std::to_string(c), kinds[(types >> (2 * c)) & 3]});
  }
  CsvTable t;
  if (in.remaining() >= 2 && in.rest()[0] == 0x1f && in.rest()[1] == 0x8b)
    t = read_csv(gz.write(in.rest(), in.remaining()), columns, opts);
  else
    t = parse_csv(std::string(reinterpret_cast<const char*>(in.rest()), in.remaining()), "<fuzz>",
                  columns, opts);
  check_table(t, ncols);
}

void run_dataset(dcalign::fuzz::Cursor& in) {
  struct Set {
    const char* name;
    std::vector<const char*> files;
  };
  static const Set sets[] = {
      {"adult", {"adult/adult.data", "adult/adult.test"}},
      {"pima-diabetes", {"pima-diabetes/pima-indians-diabetes.csv"}},
      {"heart-disease", {"heart-disease/processed.cleveland.data"}},
      {"german-credit", {"german-credit/german.csv"}},
      {"digits", {"sklearn/digits.csv.gz"}},
      {"breast-cancer", {"sklearn/breast_cancer.csv"}},
  };
  static const fs::path dir =
      fs::temp_directory_path() / ("dcalign-fuzz-csv-data-" + std::to_string(::getpid()));
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup;
  const Set& set = sets[(in.byte() & 0x7f) % 6];
  LoadOptions opts;
  opts.data_dir = dir.string();
  opts.verify_checksums = false;  // files written here, not the official ones
  opts.standardize = (in.byte() & 1) != 0;
  // Adult reads two files: the input is split at its first 0xff byte (all of it for both when
  // there is none).
  std::string a(reinterpret_cast<const char*>(in.rest()), in.remaining()), b = a;
  if (const auto cut = a.find('\xff'); cut != std::string::npos) {
    b = a.substr(cut + 1);
    a.resize(cut);
  }
  for (std::size_t f = 0; f < set.files.size(); ++f) {
    fs::create_directories((dir / set.files[f]).parent_path());
    std::ofstream out(dir / set.files[f], std::ios::binary | std::ios::trunc);
    const std::string& content = f == 0 ? a : b;
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) std::abort();
  }
  const TrainTest tt = load_dataset(set.name, opts);
  check_dataset(tt.train);
  check_dataset(tt.test);
  check(tt.train.features() == tt.test.features(), "train and test features differ");
  const SampleCounts n = sample_counts(set.name, opts);
  check(n.train == tt.train.samples() && n.test == tt.test.samples(), "sample_counts differ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dcalign::fuzz::Cursor in(data, size);
  try {
    if (size > 0 && data[0] >= 0x80) {
      run_dataset(in);
    } else {
      run_parse(in);
    }
  } catch (const dcalign::Error&) {
    // Malformed input is reported as a dcalign::Error naming the file and line.
  } catch (const std::exception& e) {
    dcalign::fuzz::unexpected("fuzz_csv", e.what());
  }
  return 0;
}
