#pragma once
// Data layer for the end-to-end experiments: readers for the offline benchmark datasets
// (../shared/datasets, see its README.md), named dataset loaders with a fixed, documented
// preprocessing, and deterministic partitions of samples among collaborating users.
//
// Conventions. A dataset is a Matrix<double> X with one sample per row (samples x features) and
// a label vector y; for classification y holds class indices 0..K-1 stored as doubles, so the
// same struct can carry a regression target later. Every failure caused by a file (missing,
// unreadable, corrupt, malformed) throws IoError naming the file, and the line for text files,
// and saying what was expected. Bad arguments throw InvalidInput.
//
// Preprocessing decisions (applied by load_dataset; see also LoadOptions):
// * mnist, fashion-mnist: official train (60000) / test (10000) files; pixels / 255 in [0, 1],
//   784 features in row-major pixel order (paper 001, section 7: flattened, scaled to [0, 1]).
// * digits (sklearn CSV, 8 x 8 images with values 0..16): pixels / 16 in [0, 1]; no test split.
// * adult: official adult.data / adult.test. Rows with a missing value ('?') are DROPPED from
//   both files (30162 train, 15060 test remain). Label 1 = income >50K (the test file's trailing
//   '.' is removed). Categorical columns are one-hot encoded IN PLACE (the features keep the
//   file's column order; a categorical column becomes one indicator per category, categories
//   in byte-wise lexicographic order of the values seen in the TRAIN file). A test category
//   never seen in training encodes as all zeros. The six numeric columns are standardised with
//   the TRAIN mean and population standard deviation, for both train and test.
// * pima-diabetes: zeros in glucose, blood pressure, skin thickness, insulin and BMI mean
//   "missing"; they are IMPUTED as in paper 004 (mean of the non-zero values for glucose and
//   blood pressure, median of the non-zero values for the other three), over the whole file.
//   All 8 features are continuous. No test split.
// * heart-disease (Cleveland, processed): the 6 rows with '?' (in ca or thal) are DROPPED
//   (297 remain). Label 1 = disease (num > 0). cp, restecg, slope and thal are one-hot encoded
//   in place (levels: sorted distinct values in the file); sex, fbs and exang stay 0/1;
//   age, trestbps, chol, thalach, oldpeak and ca are continuous. No test split. With
//   LoadOptions::heart_ca_categorical, ca (0-3 major vessels) is one-hot encoded too, as paper
//   004 section 4.2.2 codes it; with LoadOptions::onehot = drop_first as well, that is 004's
//   coding: 5 continuous + 3 binary + cp 3 + restecg 2 + slope 2 + ca 3 + thal 2 = 20 features.
// * german-credit: the 13 categorical 'Axx' attributes are one-hot encoded in place (levels:
//   sorted distinct codes in the file); the 7 numeric attributes are continuous. Label 1 = bad
//   credit (file class 2), 0 = good (file class 1). No test split.
// * breast-cancer (sklearn CSV): 30 continuous features, label 0 = malignant, 1 = benign. The
//   first line's declared counts are checked. No test split.
// * hiv, bbbp (MoleculeNet, SMILES and a binary label): 2048-bit Morgan fingerprints of radius
//   2 computed with RDKit (0/1 features, never standardised) and cached; SMILES RDKit cannot
//   read are DROPPED and counted in Dataset::note (none in hiv, 11 of 2050 in bbbp). No test
//   split. Label 1 = HIV_active (1443 of 41127) or p_np (blood-brain barrier penetration).
// * Continuous columns (listed in Dataset::continuous_columns) are standardised when
//   LoadOptions::standardize is set: with the train statistics where there is an official
//   split (adult), else with the statistics of the whole file. Callers that want statistics
//   from their own training part only can load with standardize = false and use Standardizer.
//   One-hot, binary and pixel columns are never standardised.
// * One-hot coding (LoadOptions::onehot): `full` gives one indicator per level; `drop_first`
//   leaves out the indicator of each column's first level (the smallest code, or the
//   byte-wise first string), as pandas' get_dummies(drop_first=True) does, so that level
//   encodes as all zeros (paper 004 section 4.2). A test-file level never seen in training
//   also encodes as all zeros. Only the tabular sets have one-hot columns.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dcalign/checked.hpp"
#include "dcalign/error.hpp"
#include "dcalign/matrix.hpp"
#include "dcalign/random.hpp"

namespace dcalign::data {

// ------------------------------------------------------------------------------------------
// Locating and verifying files

/// How the categorical columns of the tabular sets are one-hot encoded (see the header comment).
enum class OneHotCoding { full, drop_first };
/// "full" or "drop-first"; anything else throws InvalidInput listing both.
OneHotCoding parse_onehot_coding(const std::string& name);

struct LoadOptions {
  /// Directory holding the dataset folders (mnist/, adult/, ...). Empty: the environment
  /// variable DCALIGN_DATA if set and non-empty, else default_data_dir().
  std::string data_dir;
  /// Check the SHA-256 of every file the dataset reads against the official file's, which
  /// dcalign knows (verify_official_checksums), before reading it: a modified or truncated
  /// copy is an error, not a silently different experiment. Off: a deliberately changed copy.
  bool verify_checksums = true;
  /// Standardise the continuous columns (see the header comment).
  bool standardize = true;
  /// One indicator per level, or all but the first level's (pandas' drop_first).
  OneHotCoding onehot = OneHotCoding::full;
  /// heart-disease only: ca one-hot encoded instead of continuous (paper 004's coding). Set for
  /// another dataset, load_dataset throws InvalidInput.
  bool heart_ca_categorical = false;
  /// Molecule sets (hiv, bbbp): where their fingerprints are cached (resolve_cache_dir), and
  /// whether to use the cache at all. The data directory itself is never written.
  std::string cache_dir;
  bool cache = true;
};

/// Where derived data (molecule fingerprints) are cached: explicit_dir if non-empty, else
/// $DCALIGN_CACHE if non-empty, else $XDG_CACHE_HOME/dcalign, else $HOME/.cache/dcalign; "" when
/// none of these exists (no caching).
std::string resolve_cache_dir(const std::string& explicit_dir);

/// The directory compiled in at build time: SOURCE/../shared/datasets (SOURCE: the checkout).
std::string default_data_dir();
/// explicit_dir if non-empty, else $DCALIGN_DATA if non-empty, else default_data_dir().
std::string resolve_data_dir(const std::string& explicit_dir);

/// Lower-case hex SHA-256 of a file's bytes.
std::string sha256_file(const std::string& path);
/// Checks each file (path relative to data_dir, as written in SHA256SUMS) against
/// data_dir/SHA256SUMS. Throws IoError on a missing SHA256SUMS, a file without an entry,
/// an unreadable file or a mismatch (naming the file and both digests).
void verify_checksums(const std::string& data_dir, const std::vector<std::string>& files);
/// Checks each dataset file (path relative to data_dir, as dataset_files names it) against
/// the SHA-256 of the official file, compiled into dcalign (the digests of the files that
/// scripts/download_datasets.sh fetches and ../shared/datasets/SHA256SUMS lists). Throws
/// IoError naming the file and both digests on a mismatch, and for a file dcalign knows no
/// digest of. Hashing costs about 1 ms per MB (MNIST's four files: 40 ms).
void verify_official_checksums(const std::string& data_dir, const std::vector<std::string>& files);

// ------------------------------------------------------------------------------------------
// IDX files (MNIST layout), gzip-compressed or plain: zlib reads both.

struct IdxImages {
  index_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols bytes, image after image, row-major
};

/// Declared dimensions of an IDX file (magic 2051 -> {count, rows, cols}, 2049 -> {count});
/// reads only the header, so it is cheap.
std::vector<index_t> read_idx_dims(const std::string& path);
/// Reads an image file (magic 2051, unsigned bytes, 3 dimensions). Throws IoError on a bad
/// magic, a truncated or corrupt gzip stream, fewer or more pixels than the header declares.
IdxImages read_idx_images(const std::string& path);
/// Reads a label file (magic 2049, unsigned bytes, 1 dimension), with the same checks.
std::vector<std::uint8_t> read_idx_labels(const std::string& path);

// ------------------------------------------------------------------------------------------
// CSV files with typed columns

enum class ColumnType { numeric, categorical, ignore };

struct CsvColumn {
  std::string name;
  ColumnType type = ColumnType::numeric;
};

struct CsvOptions {
  char delimiter = ',';
  /// Lines at the top that are not data (kept verbatim in CsvTable::header).
  index_t header_lines = 0;
  /// A cell equal to one of these (after trimming) is missing instead of an error. Empty: no
  /// missing values are allowed, so every numeric cell must parse as a finite number.
  std::vector<std::string> missing_tokens;
};

/// Parsed CSV. Fields may be quoted with '"' ("" inside quotes is one quote; a quoted field
/// cannot span lines); spaces around unquoted fields are trimmed; blank lines are skipped;
/// CRLF line ends are accepted. The file may be gzip-compressed.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<CsvColumn> columns;
  index_t rows = 0;
  /// numbers[c] has `rows` entries for numeric columns (NaN where missing), else is empty.
  std::vector<std::vector<double>> numbers;
  /// strings[c] has `rows` entries for categorical columns ("" where missing), else is empty.
  std::vector<std::vector<std::string>> strings;
  /// 1-based line in the file of each row, for error messages about values.
  std::vector<index_t> lines;
  /// missing_mask[r * columns.size() + c] != 0 when the cell was a missing token.
  std::vector<std::uint8_t> missing_mask;

  bool missing(index_t row, index_t col) const {
    return missing_mask[static_cast<size_t>(row) * columns.size() + static_cast<size_t>(col)];
  }
  bool row_has_missing(index_t row) const;
};

/// Reads a CSV file whose every data line has exactly columns.size() fields. Throws IoError
/// "<path>: line N: ..." for a wrong field count, a non-numeric or non-finite cell in a numeric
/// column, an unterminated quote, or a file that cannot be read.
CsvTable read_csv(const std::string& path, const std::vector<CsvColumn>& columns,
                  const CsvOptions& opts = {});
/// The same on text already in memory; `source` names it in error messages.
CsvTable parse_csv(const std::string& text, const std::string& source,
                   const std::vector<CsvColumn>& columns, const CsvOptions& opts = {});

// ------------------------------------------------------------------------------------------
// Datasets

struct Dataset {
  std::string name;
  Matrix<double> X;         // samples x features
  std::vector<double> y;    // class index (num_classes > 0) or target value
  index_t num_classes = 0;  // 0 = regression
  std::vector<std::string> feature_names, class_names;
  std::vector<index_t> continuous_columns;  // columns LoadOptions::standardize acts on
  /// Molecule sets: RDKit's canonical SMILES of each row (to tell molecules apart across sets);
  /// empty for the other sets.
  std::vector<std::string> sample_ids;
  /// What the loader left out or derived, for the record (e.g. SMILES RDKit cannot read).
  std::string note;

  index_t samples() const { return X.rows(); }
  index_t features() const { return X.cols(); }
};

struct TrainTest {
  Dataset train;
  /// 0 rows (but the same features and metadata) when the set has no official split.
  Dataset test;
};

/// "mnist", "fashion-mnist", "adult", "pima-diabetes", "heart-disease", "german-credit",
/// "digits", "breast-cancer", "hiv", "bbbp".
std::vector<std::string> dataset_names();
/// Files a dataset reads, relative to the data directory (as listed in SHA256SUMS).
std::vector<std::string> dataset_files(const std::string& name);
/// Loads a dataset by name (see the header comment for what is done to it). Throws
/// InvalidInput listing the known names for an unknown name.
TrainTest load_dataset(const std::string& name, const LoadOptions& opts = {});

struct SampleCounts {
  index_t train = 0, test = 0;
};
/// Number of samples load_dataset would return. Reads only the headers of IDX files; the small
/// CSV sets are parsed, since rows dropped for missing values are only known after parsing.
SampleCounts sample_counts(const std::string& name, const LoadOptions& opts = {});

/// Column standardisation x -> (x - mean) / sd with the population standard deviation; a
/// constant column gets sd 1 (it becomes 0) so that no NaN appears.
struct Standardizer {
  std::vector<index_t> columns;
  std::vector<double> mean, sd;

  static Standardizer fit(const Matrix<double>& X, const std::vector<index_t>& columns);
  void apply(Matrix<double>& X) const;
};

// ------------------------------------------------------------------------------------------
// Molecules (paper 003 section IV-B): SMILES to Morgan bit fingerprints with RDKit. The
// datasets "hiv" (MoleculeNet HIV, 41127 molecules, label HIV_active) and "bbbp" (MoleculeNet
// BBBP, 2050 molecules, label p_np) load as 2048 0/1 features of radius 2, no official test
// split; rows whose SMILES RDKit cannot read are left out and counted in Dataset::note. Their
// fingerprints are cached (LoadOptions::cache_dir), keyed by the SHA-256 of the source file and
// the fingerprint settings; a cache file that does not match is recomputed and replaced.

/// Whether this build links RDKit; without it the molecule functions throw BackendError.
bool have_rdkit();

struct MorganOptions {
  int radius = 2;   ///< 0..8
  int bits = 2048;  ///< 1..65536
};

struct Fingerprints {
  Matrix<double> X;                    ///< one row per molecule read, entries 0 or 1
  std::vector<std::string> canonical;  ///< RDKit's canonical SMILES of each row
  std::vector<index_t> rows;           ///< index into the input of each row
  std::vector<index_t> failed;         ///< inputs RDKit could not read (no row)
};

/// Morgan (ECFP-like, RDKit's GetMorganFingerprintAsBitVect) fingerprints of SMILES strings.
/// Throws InvalidInput for options out of range or more than 2^31 values in all.
Fingerprints morgan_fingerprints(const std::vector<std::string>& smiles,
                                 const MorganOptions& opts = {});

// ------------------------------------------------------------------------------------------
// Partitions among users. Every function is a deterministic function of its arguments and
// seed (all draws come from Rng). Each user's index list is sorted increasingly.

using Partition = std::vector<std::vector<index_t>>;

/// num_users disjoint sets of per_user samples drawn uniformly without replacement from
/// 0..num_samples-1. Throws InvalidInput when num_users * per_user > num_samples.
Partition partition_iid(index_t num_samples, index_t num_users, index_t per_user,
                        std::uint64_t seed);

/// All num_samples indices shuffled and dealt into num_users parts whose sizes differ by at
/// most one (the first num_samples % num_users users get one more), e.g. to give every user a
/// share of a test set.
Partition partition_even(index_t num_samples, index_t num_users, std::uint64_t seed);

/// Label skew as in paper 001's TDC experiment: user u holds only class u % num_classes
/// (round-robin), per_user samples drawn without replacement, disjoint across users. With
/// per_user == 0 every sample of a class is used, dealt evenly among the users holding that
/// class. Throws InvalidInput when a class has fewer samples than its users need (naming the
/// class and both numbers), or when a label is not an integer in [0, num_classes).
Partition partition_label_skew(const std::vector<double>& y, index_t num_classes, index_t num_users,
                               index_t per_user, std::uint64_t seed);

/// Regression targets as classes for the skewed partitions: the index (0 .. bins-1, as a
/// double) of each value's quantile bin, bin b holding the values of ranks [b n / bins,
/// (b + 1) n / bins) in increasing order; equal values share the bin of the first of them. So
/// Dirichlet skew over these bins skews users towards low or high targets. Throws InvalidInput
/// for bins < 1, more bins than values, or a non-finite value.
std::vector<double> quantile_bins(const std::vector<double>& y, index_t bins);

/// Dirichlet label skew: user u draws class proportions p_u ~ Dirichlet(alpha, ..., alpha)
/// (num_classes entries), then per_user samples, each of class k with probability p_u[k].
/// Samples are drawn without replacement and disjoint across users; users draw in turn (one
/// sample each per round) so that exhausted classes hurt no user more than another. When a
/// class runs out, the draw is renormalised over the classes left; if the user's proportions
/// are zero on all of those, the class is drawn in proportion to the samples left. Small alpha
/// gives users dominated by few classes, large alpha gives nearly IID users. Throws
/// InvalidInput when num_users * per_user exceeds the samples or alpha <= 0.
Partition partition_dirichlet(const std::vector<double>& y, index_t num_classes, index_t num_users,
                              index_t per_user, double alpha, std::uint64_t seed);

/// Gamma(shape, 1) variate (Marsaglia-Tsang 2000; for shape < 1 the boost
/// Gamma(shape) = Gamma(shape + 1) * U^(1/shape)). May underflow to 0 for tiny shapes.
double sample_gamma(double shape, Rng& rng);
/// Dirichlet(alpha, ..., alpha) vector of length k; computed from log-Gamma variates so that
/// tiny alpha does not turn every component into 0.
std::vector<double> sample_dirichlet(index_t k, double alpha, Rng& rng);

/// A random train/test split of a dataset: test_size samples in the test part.
TrainTest random_split(const Dataset& d, index_t test_size, std::uint64_t seed);

/// How many of n rows each class gets in a stratified subsample of a set with class_sizes[k]
/// rows of class k (N rows in all, 0 <= n <= N): largest remainder (Hamilton) rounding of the
/// quotas n * class_sizes[k] / N. Every class first gets floor(quota); the rows left over (fewer
/// than the number of classes) go one each to the classes with the largest remainders
/// n * class_sizes[k] mod N, ties to the smaller class index. So every class gets floor(quota)
/// or ceil(quota) rows, never more than it has, and the counts add up to n. Computed in exact
/// integer arithmetic. Throws InvalidInput for a negative size or n outside 0..N.
std::vector<index_t> stratified_allocation(const std::vector<index_t>& class_sizes, index_t n);

/// n of the y.size() samples, drawn without replacement from the seed alone and returned sorted
/// increasingly. stratified (classification, num_classes > 0): class k contributes
/// stratified_allocation(class sizes, n)[k] of its samples, drawn uniformly within the class;
/// otherwise (or for regression, num_classes = 0) a uniform sample of n. Throws InvalidInput
/// when n is outside 0..y.size() or a label is not a class index.
std::vector<index_t> subsample(const std::vector<double>& y, index_t num_classes, index_t n,
                               bool stratified, std::uint64_t seed);

/// The dataset grown to n rows by repeating its rows in order: row k of the result is row
/// k mod d.samples() of d (k = 0..n-1), so the first d.samples() rows are d itself and row k
/// repeats row k - d.samples(). No randomness. Used to emulate files that hold the same records
/// several times (the 1025-row Heart disease file repeats the Cleveland patients). Throws
/// InvalidInput when d has no rows or n < d.samples().
Dataset repeat_rows(const Dataset& d, index_t n);

/// One pool of a set's official training and test rows: the training rows, then the test rows
/// (X, y and, where both have them, sample_ids), with the training set's metadata; the test set
/// of the result has 0 rows, as for a set without an official split. Throws InvalidInput when
/// the two disagree in features or classes, or when tt has no test rows to pool.
TrainTest pool_splits(const TrainTest& tt);

// ------------------------------------------------------------------------------------------
// Gathering rows

/// [*parts[0]; *parts[1]; ...]: the rows of every part, in order, without copying the parts
/// first (0 x 0 for no parts). Throws InvalidInput when the parts' column counts differ.
template <typename T>
Matrix<T> vstack(const std::vector<const Matrix<T>*>& parts) {
  index_t rows = 0;
  const index_t cols = parts.empty() ? 0 : parts[0]->cols();
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k]->cols() != cols)
      throw InvalidInput("vstack: part " + std::to_string(k) + " has " +
                         std::to_string(parts[k]->cols()) + " columns, expected the " +
                         std::to_string(cols) + " of part 0");
    rows = checked_add(rows, parts[k]->rows(), "vstack: rows");
  }
  Matrix<T> out(rows, cols);
  index_t r0 = 0;
  for (const Matrix<T>* p : parts) {
    // Column by column: each part's column lands contiguously (column-major storage).
    for (index_t j = 0; j < cols; ++j)
      std::copy(p->data() + j * p->rows(), p->data() + (j + 1) * p->rows(),
                out.data() + j * rows + r0);
    r0 += p->rows();
  }
  return out;
}

/// [parts[0]; parts[1]; ...], as above.
template <typename T>
Matrix<T> vstack(const std::vector<Matrix<T>>& parts) {
  std::vector<const Matrix<T>*> ptrs;
  ptrs.reserve(parts.size());
  for (const auto& p : parts) ptrs.push_back(&p);
  return vstack(ptrs);
}

/// Rows idx[0], idx[1], ... of X, in that order. Throws InvalidInput on an index out of range.
template <typename T>
Matrix<T> take_rows(const Matrix<T>& X, const std::vector<index_t>& idx) {
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k] < 0 || idx[k] >= X.rows())
      throw InvalidInput("take_rows: row index " + std::to_string(idx[k]) + " at position " +
                         std::to_string(k) + " is outside the " + std::to_string(X.rows()) +
                         " rows of the matrix");
  const index_t n = static_cast<index_t>(idx.size());
  Matrix<T> out(n, X.cols());
  // Column by column: the destination is written contiguously (column-major storage).
  for (index_t j = 0; j < X.cols(); ++j) {
    const T* src = X.data() + j * X.rows();
    T* dst = out.data() + j * n;
    for (index_t r = 0; r < n; ++r) dst[r] = src[idx[static_cast<size_t>(r)]];
  }
  return out;
}

/// Columns idx[0], idx[1], ... of X, in that order (a user's block of the features in a vertical
/// partition). Throws InvalidInput on an index out of range.
template <typename T>
Matrix<T> take_columns(const Matrix<T>& X, const std::vector<index_t>& idx) {
  for (index_t j : idx)
    if (j < 0 || j >= X.cols())
      throw InvalidInput("take_columns: column index " + std::to_string(j) + " out of range for " +
                         std::to_string(X.cols()) + " columns");
  Matrix<T> out(X.rows(), static_cast<index_t>(idx.size()));
  for (size_t k = 0; k < idx.size(); ++k)
    std::copy(X.data() + idx[k] * X.rows(), X.data() + (idx[k] + 1) * X.rows(),
              out.data() + static_cast<index_t>(k) * X.rows());
  return out;
}

/// The columns of a dataset split into `blocks` complementary blocks of whole attributes, for
/// vertical partitions: the one-hot columns of one attribute ("attr=level") stay together, and
/// the attributes, in column order, are dealt into consecutive blocks whose attribute counts
/// differ by at most one (the first blocks get the extra ones). Throws InvalidInput when there
/// are fewer attributes than blocks, so that no block is empty.
std::vector<std::vector<index_t>> attribute_blocks(const std::vector<std::string>& feature_names,
                                                   index_t blocks);

/// Entries idx[0], idx[1], ... of v. Throws InvalidInput on an index out of range.
template <typename T>
std::vector<T> take(const std::vector<T>& v, const std::vector<index_t>& idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (index_t i : idx) {
    if (i < 0 || i >= static_cast<index_t>(v.size()))
      throw InvalidInput("take: index " + std::to_string(i) + " out of range for " +
                         std::to_string(v.size()) + " entries");
    out.push_back(v[static_cast<size_t>(i)]);
  }
  return out;
}

/// The samples idx of a dataset (rows of X and entries of y), metadata copied.
Dataset take(const Dataset& d, const std::vector<index_t>& idx);

}  // namespace dcalign::data
