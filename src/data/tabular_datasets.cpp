// The tabular datasets (Adult, Pima, Heart disease, German credit, scikit-learn's digits and
// breast cancer) and their shared pipeline: read typed columns, fix dataset-specific missing
// values, choose the rows kept, fit the encoding on the training rows, encode, and standardise
// the continuous columns. The table of datasets is in datasets.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "datasets_internal.hpp"
#include "dcalign/checked.hpp"
#include "dcalign/data.hpp"

namespace dcalign::data {

namespace {

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  // Halves first: the same result (halving is exact), without overflowing for values near the
  // largest double.
  return n % 2 == 1 ? v[n / 2] : 0.5 * v[n / 2 - 1] + 0.5 * v[n / 2];
}

}  // namespace

namespace detail {

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

// ---- scikit-learn diabetes (Efron et al. 2004): a regression task

TrainTest load_diabetes(const std::string& dir, const LoadOptions& opts) {
  // The ten raw baseline variables (not sklearn's scaled copy) and the disease progression one
  // year later, 25 to 346; the header line names them in this order, which is checked.
  const std::vector<std::string> names = {"age", "sex", "bmi", "bp", "s1",
                                          "s2",  "s3",  "s4",  "s5", "s6"};
  std::vector<Field> fields;
  for (const auto& n : names) fields.push_back({n, ColumnType::numeric, Role::continuous});
  fields.push_back({"target", ColumnType::numeric, Role::label});
  CsvOptions csv;
  csv.header_lines = 1;
  TableSet s;
  s.path = dir + "/sklearn/diabetes.csv";
  s.table = read_csv(s.path, csv_columns(fields), csv);
  std::string expect;
  for (const auto& f : fields) expect += (expect.empty() ? "" : ",") + f.name;
  if (s.table.header.at(0) != expect)
    throw IoError("'" + s.path + "': line 1 is '" + s.table.header.at(0) + "', expected '" +
                  expect + "'");
  s.rows = all_rows(s.table);
  auto target = [](const CsvTable& t, const std::string&, index_t r) -> double {
    return t.numbers[10][static_cast<size_t>(r)];  // finite: read_csv allows no missing cell
  };
  return build_tabular("diabetes", fields, s, nullptr, target, 0, {}, opts);
}

}  // namespace detail
}  // namespace dcalign::data
