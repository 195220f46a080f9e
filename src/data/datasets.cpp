// Named dataset loaders. The preprocessing of every dataset is documented in data.hpp; this file
// implements it. Tabular sets share one pipeline: read typed columns, fix dataset-specific
// missing values, choose the rows kept, fit the encoding on the training rows, encode, and
// standardise the continuous columns.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dcalign/checked.hpp"
#include "dcalign/data.hpp"
#include "molecules_internal.hpp"

namespace dcalign::data {

namespace {

const std::vector<std::string>& known_names() {
  static const std::vector<std::string> names = {
      "mnist",         "fashion-mnist", "adult",         "pima-diabetes", "heart-disease",
      "german-credit", "digits",        "breast-cancer", "hiv",           "bbbp"};
  return names;
}

[[noreturn]] void unknown_dataset(const std::string& name) {
  std::string list;
  for (const auto& n : known_names()) list += (list.empty() ? "" : ", ") + n;
  throw InvalidInput("unknown dataset '" + name + "'; known datasets: " + list);
}

// The statistics below are computed on the values divided by a power of two near the largest
// magnitude: scaling by a power of two is exact, so the results are the same bits as the plain
// formulas, but sums of values near the largest double (which the readers accept as finite)
// cannot overflow to inf and turn a column into NaN.
double power_of_two_scale(const double* x, index_t n, index_t stride) {
  double top = 0.0;
  for (index_t i = 0; i < n; ++i) top = std::max(top, std::fabs(x[i * stride]));
  if (!(top > 0.0) || !std::isfinite(top)) return 1.0;
  int e = 0;
  std::frexp(top, &e);  // top = f * 2^e with f in [0.5, 1); 2^(e-1) is always a finite double
  return std::ldexp(1.0, e - 1);
}

double scaled_mean(const double* x, index_t n, index_t stride) {
  const double s = power_of_two_scale(x, n, stride);
  double sum = 0.0;
  for (index_t i = 0; i < n; ++i) sum += x[i * stride] / s;
  return sum / static_cast<double>(n) * s;
}

std::string cell_error(const CsvTable& t, const std::string& path, index_t row, index_t col,
                       const std::string& what) {
  return "'" + path + "': line " + std::to_string(t.lines[static_cast<size_t>(row)]) + ": field " +
         std::to_string(col + 1) + " (" + t.columns[static_cast<size_t>(col)].name + "): " + what;
}

// A numeric cell that must hold an integer in [lo, hi] (class codes, binary flags).
int integer_cell(const CsvTable& t, const std::string& path, index_t row, index_t col, int lo,
                 int hi) {
  const double v = t.numbers[static_cast<size_t>(col)][static_cast<size_t>(row)];
  if (!(v >= lo && v <= hi) || v != std::floor(v)) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    throw IoError(cell_error(t, path, row, col,
                             "expected an integer in " + std::to_string(lo) + ".." +
                                 std::to_string(hi) + ", found " + std::string(buf, res.ptr)));
  }
  return static_cast<int>(v);
}

std::vector<std::string> pixel_names(index_t rows, index_t cols) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(checked_mul(rows, cols, "pixel_names: rows x cols")));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c)
      names.push_back("pixel_" + std::to_string(r) + "_" + std::to_string(c));
  return names;
}

std::vector<std::string> digit_class_names() {
  std::vector<std::string> names;
  for (int k = 0; k < 10; ++k) names.push_back(std::to_string(k));
  return names;
}

// ---------------------------------------------------------------------------------------------
// IDX image sets (MNIST, Fashion-MNIST)

Dataset load_idx_set(const std::string& name, const std::string& images_path,
                     const std::string& labels_path, std::vector<std::string> class_names) {
  const auto labels = read_idx_labels(labels_path);
  const IdxImages img = read_idx_images(images_path);
  if (img.rows != 28 || img.cols != 28)
    throw IoError("'" + images_path + "': images are " + std::to_string(img.rows) + " x " +
                  std::to_string(img.cols) + ", expected 28 x 28");
  if (img.count != static_cast<index_t>(labels.size()))
    throw IoError("'" + images_path + "' holds " + std::to_string(img.count) + " images but '" +
                  labels_path + "' holds " + std::to_string(labels.size()) +
                  " labels; expected equal counts");
  const index_t k = static_cast<index_t>(class_names.size());
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= k)
      throw IoError("'" + labels_path + "': label " + std::to_string(labels[i]) + " of item " +
                    std::to_string(i) + ", expected 0.." + std::to_string(k - 1));

  Dataset d;
  d.name = name;
  const index_t n = img.count, m = checked_mul(img.rows, img.cols, "pixels per image");
  d.X = Matrix<double>(n, m);
  // A table gives exactly p / 255 (correctly rounded), unlike multiplying by 1/255.
  double scale[256];
  for (int p = 0; p < 256; ++p) scale[p] = p / 255.0;
  // Pixels are image-major, X is column-major: transpose in blocks of images so that both the
  // reads (within a block) and the writes (along a column) stay in cache.
  constexpr index_t kBlock = 64;
  const std::uint8_t* pix = img.pixels.data();
  double* x = d.X.data();
  for (index_t i0 = 0; i0 < n; i0 += kBlock) {
    const index_t i1 = std::min(n, i0 + kBlock);
    for (index_t j = 0; j < m; ++j)
      for (index_t i = i0; i < i1; ++i) x[i + j * n] = scale[pix[i * m + j]];
  }
  d.y.assign(labels.begin(), labels.end());
  d.num_classes = k;
  d.feature_names = pixel_names(img.rows, img.cols);
  d.class_names = std::move(class_names);
  return d;
}

TrainTest load_idx_pair(const std::string& name, const std::string& dir,
                        const std::vector<std::string>& class_names) {
  TrainTest tt;
  tt.train = load_idx_set(name, dir + "/" + name + "/train-images-idx3-ubyte.gz",
                          dir + "/" + name + "/train-labels-idx1-ubyte.gz", class_names);
  tt.test = load_idx_set(name, dir + "/" + name + "/t10k-images-idx3-ubyte.gz",
                         dir + "/" + name + "/t10k-labels-idx1-ubyte.gz", class_names);
  return tt;
}

// ---------------------------------------------------------------------------------------------
// Tabular sets

// What a source column becomes in X.
enum class Role {
  continuous,  // copied, standardised when requested
  binary,      // a 0/1 flag, copied as is
  onehot,      // one indicator column per level
  label,       // the target; not a feature
};

struct Field {
  std::string name;
  ColumnType type;
  Role role;
};

std::vector<CsvColumn> csv_columns(const std::vector<Field>& fields) {
  std::vector<CsvColumn> cols;
  for (const auto& f : fields) cols.push_back({f.name, f.type});
  return cols;
}

// Shortest round-trip text of a number, so that a numeric code 4.0 becomes the level "4".
std::string number_text(double v) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

struct Encoding {
  std::vector<std::vector<std::string>> levels;  // per field, for one-hot fields
  std::vector<std::map<std::string, index_t>> level_index;
  std::vector<std::string> feature_names;
  std::vector<index_t> continuous;
  index_t width = 0;
};

// Levels of the one-hot fields are the distinct values in the fitting rows, ordered by value
// (numeric codes numerically, strings byte-wise), so the encoding depends on the data only.
// drop_first removes each field's first level from its levels, so that it encodes as all zeros.
Encoding fit_encoding(const CsvTable& t, const std::vector<Field>& fields,
                      const std::vector<index_t>& rows, OneHotCoding coding) {
  Encoding e;
  e.levels.resize(fields.size());
  e.level_index.resize(fields.size());
  for (size_t c = 0; c < fields.size(); ++c) {
    const Field& f = fields[c];
    switch (f.role) {
      case Role::label:
        break;
      case Role::continuous:
        e.continuous.push_back(e.width);
        [[fallthrough]];
      case Role::binary:
        e.feature_names.push_back(f.name);
        ++e.width;
        break;
      case Role::onehot: {
        auto& lv = e.levels[c];
        if (f.type == ColumnType::numeric) {
          std::vector<double> vals;
          for (index_t r : rows) vals.push_back(t.numbers[c][static_cast<size_t>(r)]);
          std::sort(vals.begin(), vals.end());
          vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
          for (double v : vals) lv.push_back(number_text(v));
        } else {
          for (index_t r : rows) lv.push_back(t.strings[c][static_cast<size_t>(r)]);
          std::sort(lv.begin(), lv.end());
          lv.erase(std::unique(lv.begin(), lv.end()), lv.end());
        }
        if (coding == OneHotCoding::drop_first && !lv.empty()) lv.erase(lv.begin());
        for (size_t k = 0; k < lv.size(); ++k) {
          e.level_index[c][lv[k]] = e.width + static_cast<index_t>(k);
          e.feature_names.push_back(f.name + "=" + lv[k]);
        }
        e.width += static_cast<index_t>(lv.size());
        break;
      }
    }
  }
  return e;
}

Matrix<double> encode(const CsvTable& t, const std::string& path, const std::vector<Field>& fields,
                      const std::vector<index_t>& rows, const Encoding& e) {
  const index_t n = static_cast<index_t>(rows.size());
  Matrix<double> X(n, e.width);
  index_t out_col = 0;
  for (size_t c = 0; c < fields.size(); ++c) {
    const Field& f = fields[c];
    if (f.role == Role::label) continue;
    if (f.role == Role::onehot) {
      for (index_t i = 0; i < n; ++i) {
        const size_t r = static_cast<size_t>(rows[static_cast<size_t>(i)]);
        const std::string v =
            f.type == ColumnType::numeric ? number_text(t.numbers[c][r]) : t.strings[c][r];
        const auto it = e.level_index[c].find(v);
        // A level absent from the fitting rows (possible only in a test file) encodes as all
        // zeros, i.e. "none of the known categories"; so does the first level under
        // drop_first, which fit_encoding left out of the levels.
        if (it != e.level_index[c].end()) X(i, it->second) = 1.0;
      }
      out_col += static_cast<index_t>(e.levels[c].size());
      continue;
    }
    for (index_t i = 0; i < n; ++i) {
      const index_t r = rows[static_cast<size_t>(i)];
      X(i, out_col) = f.role == Role::binary
                          ? integer_cell(t, path, r, static_cast<index_t>(c), 0, 1)
                          : t.numbers[c][static_cast<size_t>(r)];
    }
    ++out_col;
  }
  return X;
}

std::vector<index_t> all_rows(const CsvTable& t) {
  std::vector<index_t> rows(static_cast<size_t>(t.rows));
  for (index_t r = 0; r < t.rows; ++r) rows[static_cast<size_t>(r)] = r;
  return rows;
}

std::vector<index_t> complete_rows(const CsvTable& t) {
  std::vector<index_t> rows;
  for (index_t r = 0; r < t.rows; ++r)
    if (!t.row_has_missing(r)) rows.push_back(r);
  return rows;
}

using LabelFn = std::function<double(const CsvTable&, const std::string&, index_t)>;

struct TableSet {
  std::string path;
  CsvTable table;
  std::vector<index_t> rows;  // rows kept
};

// Encodes one or two tables (the second, if given, is the official test file) into a TrainTest
// with the encoding and the standardisation fitted on the first.
TrainTest build_tabular(const std::string& name, const std::vector<Field>& fields,
                        const TableSet& train, const TableSet* test, const LabelFn& label,
                        index_t num_classes, std::vector<std::string> class_names,
                        const LoadOptions& opts) {
  const Encoding e = fit_encoding(train.table, fields, train.rows, opts.onehot);
  const bool standardize = opts.standardize;
  auto make = [&](const TableSet& s) {
    Dataset d;
    d.name = name;
    d.X = encode(s.table, s.path, fields, s.rows, e);
    for (index_t r : s.rows) d.y.push_back(label(s.table, s.path, r));
    d.num_classes = num_classes;
    d.feature_names = e.feature_names;
    d.class_names = class_names;
    d.continuous_columns = e.continuous;
    return d;
  };
  TrainTest tt;
  tt.train = make(train);
  if (test != nullptr) {
    tt.test = make(*test);
  } else {
    tt.test = tt.train;
    tt.test.X = Matrix<double>(0, tt.train.X.cols());
    tt.test.y.clear();
  }
  if (standardize && !e.continuous.empty() && tt.train.samples() > 0) {
    const Standardizer s = Standardizer::fit(tt.train.X, e.continuous);
    s.apply(tt.train.X);
    s.apply(tt.test.X);
  }
  return tt;
}

// ---- Adult

TrainTest load_adult(const std::string& dir, const LoadOptions& opts) {
  using CT = ColumnType;
  const std::vector<Field> fields = {
      {"age", CT::numeric, Role::continuous},
      {"workclass", CT::categorical, Role::onehot},
      {"fnlwgt", CT::numeric, Role::continuous},
      {"education", CT::categorical, Role::onehot},
      {"education-num", CT::numeric, Role::continuous},
      {"marital-status", CT::categorical, Role::onehot},
      {"occupation", CT::categorical, Role::onehot},
      {"relationship", CT::categorical, Role::onehot},
      {"race", CT::categorical, Role::onehot},
      {"sex", CT::categorical, Role::onehot},
      {"capital-gain", CT::numeric, Role::continuous},
      {"capital-loss", CT::numeric, Role::continuous},
      {"hours-per-week", CT::numeric, Role::continuous},
      {"native-country", CT::categorical, Role::onehot},
      {"income", CT::categorical, Role::label},
  };
  CsvOptions csv;
  csv.missing_tokens = {"?"};
  TableSet train, test;
  train.path = dir + "/adult/adult.data";
  train.table = read_csv(train.path, csv_columns(fields), csv);
  csv.header_lines = 1;  // "|1x3 Cross validator"
  test.path = dir + "/adult/adult.test";
  test.table = read_csv(test.path, csv_columns(fields), csv);
  // Policy: drop incomplete rows (about 7% of each file) rather than invent values for
  // workclass, occupation or native-country.
  train.rows = complete_rows(train.table);
  test.rows = complete_rows(test.table);
  constexpr index_t income = 14;
  auto label = [](const CsvTable& t, const std::string& path, index_t r) -> double {
    std::string v = t.strings[income][static_cast<size_t>(r)];
    // The test file writes "<=50K." and ">50K."; the training file has no dot.
    if (!v.empty() && v.back() == '.') v.pop_back();
    if (v == ">50K") return 1.0;
    if (v == "<=50K") return 0.0;
    throw IoError(cell_error(
        t, path, r, income,
        "expected '<=50K' or '>50K', found '" + t.strings[income][static_cast<size_t>(r)] + "'"));
  };
  return build_tabular("adult", fields, train, &test, label, 2, {"<=50K", ">50K"}, opts);
}

// ---- Pima Indians Diabetes

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  // Halves first: the same result (halving is exact), without overflowing for values near the
  // largest double.
  return n % 2 == 1 ? v[n / 2] : 0.5 * v[n / 2 - 1] + 0.5 * v[n / 2];
}

TrainTest load_pima(const std::string& dir, const LoadOptions& opts) {
  using CT = ColumnType;
  const std::vector<Field> fields = {
      {"pregnancies", CT::numeric, Role::continuous},
      {"glucose", CT::numeric, Role::continuous},
      {"blood_pressure", CT::numeric, Role::continuous},
      {"skin_thickness", CT::numeric, Role::continuous},
      {"insulin", CT::numeric, Role::continuous},
      {"bmi", CT::numeric, Role::continuous},
      {"diabetes_pedigree", CT::numeric, Role::continuous},
      {"age", CT::numeric, Role::continuous},
      {"outcome", CT::numeric, Role::label},
  };
  TableSet s;
  s.path = dir + "/pima-diabetes/pima-indians-diabetes.csv";
  s.table = read_csv(s.path, csv_columns(fields));
  // The file encodes "not measured" as 0 in these columns (a glucose or BMI of 0 is not
  // physiological). Impute as paper 004 does: mean for glucose and blood pressure, median for
  // the skewed skin thickness, insulin and BMI, each over the non-zero values.
  struct Impute {
    size_t col;
    bool use_median;
  };
  for (const Impute im :
       {Impute{1, false}, Impute{2, false}, Impute{3, true}, Impute{4, true}, Impute{5, true}}) {
    auto& col = s.table.numbers[im.col];
    std::vector<double> present;
    for (double v : col)
      if (v != 0.0) present.push_back(v);
    if (present.empty())
      throw IoError("'" + s.path + "': column " + fields[im.col].name +
                    " has no non-zero value to impute its missing (zero) entries from");
    double fill = 0.0;
    if (im.use_median) {
      fill = median(present);
    } else {
      fill = scaled_mean(present.data(), static_cast<index_t>(present.size()), 1);
    }
    for (double& v : col)
      if (v == 0.0) v = fill;
  }
  s.rows = all_rows(s.table);
  auto label = [](const CsvTable& t, const std::string& path, index_t r) -> double {
    return integer_cell(t, path, r, 8, 0, 1);
  };
  return build_tabular("pima-diabetes", fields, s, nullptr, label, 2, {"no diabetes", "diabetes"},
                       opts);
}

// ---- Heart disease (Cleveland)

TrainTest load_heart(const std::string& dir, const LoadOptions& lo) {
  using CT = ColumnType;
  // ca (0-3 major vessels coloured by fluoroscopy): continuous by default, one-hot as in paper
  // 004's coding on request.
  const Role ca = lo.heart_ca_categorical ? Role::onehot : Role::continuous;
  const std::vector<Field> fields = {
      {"age", CT::numeric, Role::continuous},  {"sex", CT::numeric, Role::binary},
      {"cp", CT::numeric, Role::onehot},       {"trestbps", CT::numeric, Role::continuous},
      {"chol", CT::numeric, Role::continuous}, {"fbs", CT::numeric, Role::binary},
      {"restecg", CT::numeric, Role::onehot},  {"thalach", CT::numeric, Role::continuous},
      {"exang", CT::numeric, Role::binary},    {"oldpeak", CT::numeric, Role::continuous},
      {"slope", CT::numeric, Role::onehot},    {"ca", CT::numeric, ca},
      {"thal", CT::numeric, Role::onehot},     {"num", CT::numeric, Role::label},
  };
  CsvOptions csv;
  csv.missing_tokens = {"?"};
  TableSet s;
  s.path = dir + "/heart-disease/processed.cleveland.data";
  s.table = read_csv(s.path, csv_columns(fields), csv);
  // Policy: drop the rows with an unknown ca or thal (6 of 303), the usual choice for this set.
  s.rows = complete_rows(s.table);
  auto label = [](const CsvTable& t, const std::string& path, index_t r) -> double {
    // num is the diagnosis 0 (< 50% diameter narrowing) to 4; the binary task is num > 0.
    return integer_cell(t, path, r, 13, 0, 4) > 0 ? 1.0 : 0.0;
  };
  return build_tabular("heart-disease", fields, s, nullptr, label, 2, {"no disease", "disease"},
                       lo);
}

// ---- German credit (Statlog, symbolic attributes)

TrainTest load_german(const std::string& dir, const LoadOptions& opts) {
  using CT = ColumnType;
  const std::vector<Field> fields = {
      {"checking_status", CT::categorical, Role::onehot},
      {"duration_months", CT::numeric, Role::continuous},
      {"credit_history", CT::categorical, Role::onehot},
      {"purpose", CT::categorical, Role::onehot},
      {"credit_amount", CT::numeric, Role::continuous},
      {"savings", CT::categorical, Role::onehot},
      {"employment_since", CT::categorical, Role::onehot},
      {"installment_rate", CT::numeric, Role::continuous},
      {"personal_status_sex", CT::categorical, Role::onehot},
      {"other_debtors", CT::categorical, Role::onehot},
      {"residence_since", CT::numeric, Role::continuous},
      {"property", CT::categorical, Role::onehot},
      {"age", CT::numeric, Role::continuous},
      {"other_installment_plans", CT::categorical, Role::onehot},
      {"housing", CT::categorical, Role::onehot},
      {"existing_credits", CT::numeric, Role::continuous},
      {"job", CT::categorical, Role::onehot},
      {"people_liable", CT::numeric, Role::continuous},
      {"telephone", CT::categorical, Role::onehot},
      {"foreign_worker", CT::categorical, Role::onehot},
      {"class", CT::numeric, Role::label},
  };
  TableSet s;
  s.path = dir + "/german-credit/german.csv";
  s.table = read_csv(s.path, csv_columns(fields));
  s.rows = all_rows(s.table);
  auto label = [](const CsvTable& t, const std::string& path, index_t r) -> double {
    return integer_cell(t, path, r, 20, 1, 2) == 2 ? 1.0 : 0.0;  // 1 = good, 2 = bad
  };
  return build_tabular("german-credit", fields, s, nullptr, label, 2, {"good", "bad"}, opts);
}

// ---- scikit-learn digits (8 x 8 images, values 0..16)

TrainTest load_digits(const std::string& dir) {
  std::vector<CsvColumn> cols;
  for (const auto& n : pixel_names(8, 8)) cols.push_back({n, ColumnType::numeric});
  cols.push_back({"digit", ColumnType::numeric});
  const std::string path = dir + "/sklearn/digits.csv.gz";
  const CsvTable t = read_csv(path, cols);
  TrainTest tt;
  Dataset& d = tt.train;
  d.name = "digits";
  d.X = Matrix<double>(t.rows, 64);
  for (index_t j = 0; j < 64; ++j)
    for (index_t i = 0; i < t.rows; ++i)
      // Scaled to [0, 1] like the other image sets (paper 001, section 7).
      d.X(i, j) = integer_cell(t, path, i, j, 0, 16) / 16.0;
  for (index_t i = 0; i < t.rows; ++i) d.y.push_back(integer_cell(t, path, i, 64, 0, 9));
  d.num_classes = 10;
  d.feature_names = pixel_names(8, 8);
  d.class_names = digit_class_names();
  tt.test = d;
  tt.test.X = Matrix<double>(0, 64);
  tt.test.y.clear();
  return tt;
}

// ---- scikit-learn breast cancer (Wisconsin diagnostic)

TrainTest load_breast_cancer(const std::string& dir, const LoadOptions& opts) {
  // Ten measurements, each as mean, standard error and worst value (sklearn's order and names).
  const char* base[] = {"radius",     "texture",          "perimeter", "area",
                        "smoothness", "compactness",      "concavity", "concave points",
                        "symmetry",   "fractal dimension"};
  std::vector<Field> fields;
  for (const char* b : base)
    fields.push_back({std::string("mean ") + b, ColumnType::numeric, Role::continuous});
  for (const char* b : base)
    fields.push_back({std::string(b) + " error", ColumnType::numeric, Role::continuous});
  for (const char* b : base)
    fields.push_back({std::string("worst ") + b, ColumnType::numeric, Role::continuous});
  fields.push_back({"target", ColumnType::numeric, Role::label});
  CsvOptions csv;
  csv.header_lines = 1;  // "569,30,malignant,benign": rows, features, class names
  TableSet s;
  s.path = dir + "/sklearn/breast_cancer.csv";
  s.table = read_csv(s.path, csv_columns(fields), csv);
  s.rows = all_rows(s.table);

  // The first line declares the shape; check the file against it.
  std::vector<std::string> head;
  {
    std::string cur;
    for (char ch : s.table.header.at(0)) {
      if (ch == ',') {
        head.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    head.push_back(cur);
  }
  const std::string expect = "'" + std::to_string(s.table.rows) + ",30,<class names>'";
  if (head.size() < 4 || head[0] != std::to_string(s.table.rows) || head[1] != "30")
    throw IoError("'" + s.path + "': line 1: declares '" + s.table.header.at(0) + "', expected " +
                  expect + " for the " + std::to_string(s.table.rows) + " data rows read");
  std::vector<std::string> class_names(head.begin() + 2, head.end());
  const int k = static_cast<int>(class_names.size());
  auto label = [k](const CsvTable& t, const std::string& path, index_t r) -> double {
    return integer_cell(t, path, r, 30, 0, k - 1);
  };
  return build_tabular("breast-cancer", fields, s, nullptr, label, k, class_names, opts);
}

TrainTest load_by_name(const std::string& name, const std::string& dir, const LoadOptions& opts) {
  if (name == "mnist") return load_idx_pair("mnist", dir, digit_class_names());
  if (name == "fashion-mnist")
    return load_idx_pair("fashion-mnist", dir,
                         {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                          "Sneaker", "Bag", "Ankle boot"});
  if (name == "adult") return load_adult(dir, opts);
  if (name == "pima-diabetes") return load_pima(dir, opts);
  if (name == "heart-disease") return load_heart(dir, opts);
  if (name == "german-credit") return load_german(dir, opts);
  if (name == "digits") return load_digits(dir);
  if (name == "breast-cancer") return load_breast_cancer(dir, opts);
  if (name == "hiv" || name == "bbbp") return detail::load_molecules(name, dir, opts);
  unknown_dataset(name);
}

}  // namespace

std::vector<std::string> dataset_names() { return known_names(); }

OneHotCoding parse_onehot_coding(const std::string& name) {
  if (name == "full") return OneHotCoding::full;
  if (name == "drop-first") return OneHotCoding::drop_first;
  throw InvalidInput("unknown one-hot coding '" + name + "'; expected \"full\" or \"drop-first\"");
}

std::vector<std::string> dataset_files(const std::string& name) {
  if (name == "mnist" || name == "fashion-mnist")
    return {name + "/train-images-idx3-ubyte.gz", name + "/train-labels-idx1-ubyte.gz",
            name + "/t10k-images-idx3-ubyte.gz", name + "/t10k-labels-idx1-ubyte.gz"};
  if (name == "adult") return {"adult/adult.data", "adult/adult.test"};
  if (name == "pima-diabetes") return {"pima-diabetes/pima-indians-diabetes.csv"};
  if (name == "heart-disease") return {"heart-disease/processed.cleveland.data"};
  if (name == "german-credit") return {"german-credit/german.csv"};
  if (name == "digits") return {"sklearn/digits.csv.gz"};
  if (name == "breast-cancer") return {"sklearn/breast_cancer.csv"};
  if (name == "hiv") return {"molecules/hiv.csv.gz"};
  if (name == "bbbp") return {"molecules/BBBP.csv"};
  unknown_dataset(name);
}

TrainTest load_dataset(const std::string& name, const LoadOptions& opts) {
  const auto files = dataset_files(name);  // validates the name before touching the disk
  if (opts.heart_ca_categorical && name != "heart-disease")
    throw InvalidInput("load_dataset: heart_ca_categorical applies to 'heart-disease' only, not '" +
                       name + "'");
  const std::string dir = resolve_data_dir(opts.data_dir);
  if (opts.verify_checksums) verify_official_checksums(dir, files);
  return load_by_name(name, dir, opts);
}

SampleCounts sample_counts(const std::string& name, const LoadOptions& opts) {
  const auto files = dataset_files(name);
  const std::string dir = resolve_data_dir(opts.data_dir);
  if (opts.verify_checksums) verify_official_checksums(dir, files);
  if (name == "mnist" || name == "fashion-mnist") {
    index_t counts[4];
    for (size_t f = 0; f < 4; ++f) counts[f] = read_idx_dims(dir + "/" + files[f])[0];
    for (size_t f = 0; f < 4; f += 2)
      if (counts[f] != counts[f + 1])
        throw IoError("'" + dir + "/" + files[f] + "' declares " + std::to_string(counts[f]) +
                      " images but '" + dir + "/" + files[f + 1] + "' declares " +
                      std::to_string(counts[f + 1]) + " labels; expected equal counts");
    return {counts[0], counts[2]};
  }
  LoadOptions raw = opts;
  raw.standardize = false;
  const TrainTest tt = load_by_name(name, dir, raw);
  return {tt.train.samples(), tt.test.samples()};
}

// ---------------------------------------------------------------------------------------------

Standardizer Standardizer::fit(const Matrix<double>& X, const std::vector<index_t>& columns) {
  if (X.rows() == 0) throw InvalidInput("Standardizer::fit: no rows to fit on");
  Standardizer s;
  s.columns = columns;
  const index_t n = X.rows();
  for (index_t c : columns) {
    if (c < 0 || c >= X.cols())
      throw InvalidInput("Standardizer::fit: column " + std::to_string(c) + " out of range for " +
                         std::to_string(X.cols()) + " columns");
    // Two passes: the one-pass formula loses digits on columns such as fnlwgt (~1e5 +- 1e5).
    // Both on values scaled by a power of two (exact; see power_of_two_scale), so that values
    // near the largest double give their true mean and deviation instead of inf and NaN.
    const double* x = X.data() + c * n;
    const double scale = power_of_two_scale(x, n, 1);
    const double mean = scaled_mean(x, n, 1);
    double ss = 0.0;
    for (index_t i = 0; i < n; ++i) {
      const double d = x[i] / scale - mean / scale;
      ss += d * d;
    }
    const double sd = std::sqrt(ss / static_cast<double>(n)) * scale;
    // The population deviation of values in [-M, M] is at most M, so only a non-finite value
    // (which the readers never produce) makes these non-finite.
    if (!std::isfinite(mean) || !std::isfinite(sd))
      throw InvalidInput("Standardizer::fit: column " + std::to_string(c) +
                         " holds non-finite values");
    s.mean.push_back(mean);
    s.sd.push_back(sd > 0.0 ? sd : 1.0);
  }
  return s;
}

void Standardizer::apply(Matrix<double>& X) const {
  for (size_t k = 0; k < columns.size(); ++k) {
    const index_t c = columns[k];
    if (c < 0 || c >= X.cols())
      throw InvalidInput("Standardizer::apply: column " + std::to_string(c) + " out of range for " +
                         std::to_string(X.cols()) + " columns");
    for (index_t i = 0; i < X.rows(); ++i) {
      const double x = X(i, c);
      double z = (x - mean[k]) / sd[k];
      if (!std::isfinite(z)) {
        // x - mean overflowed (values near the largest double on both sides): the same
        // quotient on operands halved (exact), and an error only if the result itself is out of
        // range (a value far outside what the statistics were fitted on).
        z = (0.5 * x - 0.5 * mean[k]) / (0.5 * sd[k]);
        if (!std::isfinite(z))
          throw InvalidInput("Standardizer::apply: row " + std::to_string(i) + ", column " +
                             std::to_string(c) + ": (x - mean) / sd is out of the double range");
      }
      X(i, c) = z;
    }
  }
}

}  // namespace dcalign::data
