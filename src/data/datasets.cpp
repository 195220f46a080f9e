// Named datasets: one table holds every name, its files, its loader and what it accepts. The
// preprocessing of every dataset is documented in data.hpp; the IDX image sets are read here,
// the tabular sets in tabular_datasets.cpp, the molecules in molecule_datasets.cpp.
#include <algorithm>
#include <future>
#include <string>
#include <vector>

#include "datasets_internal.hpp"
#include "dcalign/checked.hpp"
#include "dcalign/data.hpp"
#include "molecules_internal.hpp"

namespace dcalign::data {

namespace detail {

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

}  // namespace detail

namespace {

using detail::digit_class_names;
using detail::pixel_names;

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
  // The test set is decompressed and converted on a thread of its own while this one reads
  // the training set: loading is the serial start of every experiment (about 0.1 s of
  // MNIST's 0.5 s saved). A failure of either is rethrown, the training set's first.
  auto test = std::async(std::launch::async, [&] {
    return load_idx_set(name, dir + "/" + name + "/t10k-images-idx3-ubyte.gz",
                        dir + "/" + name + "/t10k-labels-idx1-ubyte.gz", class_names);
  });
  TrainTest tt;
  tt.train = load_idx_set(name, dir + "/" + name + "/train-images-idx3-ubyte.gz",
                          dir + "/" + name + "/train-labels-idx1-ubyte.gz", class_names);
  tt.test = test.get();
  return tt;
}

// ---------------------------------------------------------------------------------------------
// The table

struct DatasetKind {
  std::string name;
  std::vector<std::string> files;  ///< under the data directory; what the checksums cover
  TrainTest (*load)(const std::string& dir, const LoadOptions& opts);
  bool idx = false;       ///< IDX files: sample_counts reads their headers without the images
  bool heart_ca = false;  ///< accepts LoadOptions::heart_ca_categorical
};

std::vector<std::string> idx_files(const std::string& name) {
  return {name + "/train-images-idx3-ubyte.gz", name + "/train-labels-idx1-ubyte.gz",
          name + "/t10k-images-idx3-ubyte.gz", name + "/t10k-labels-idx1-ubyte.gz"};
}

const std::vector<DatasetKind>& datasets() {
  using O = const LoadOptions&;
  using D = const std::string&;
  static const std::vector<DatasetKind> table = {
      {"mnist", idx_files("mnist"),
       [](D dir, O) { return load_idx_pair("mnist", dir, digit_class_names()); }, true},
      {"fashion-mnist", idx_files("fashion-mnist"),
       [](D dir, O) {
         return load_idx_pair("fashion-mnist", dir,
                              {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                               "Shirt", "Sneaker", "Bag", "Ankle boot"});
       },
       true},
      {"adult", {"adult/adult.data", "adult/adult.test"}, detail::load_adult},
      {"pima-diabetes", {"pima-diabetes/pima-indians-diabetes.csv"}, detail::load_pima},
      {"heart-disease",
       {"heart-disease/processed.cleveland.data"},
       detail::load_heart,
       false,
       true},
      {"german-credit", {"german-credit/german.csv"}, detail::load_german},
      {"digits", {"sklearn/digits.csv.gz"}, [](D dir, O) { return detail::load_digits(dir); }},
      {"breast-cancer", {"sklearn/breast_cancer.csv"}, detail::load_breast_cancer},
      {"diabetes", {"sklearn/diabetes.csv"}, detail::load_diabetes},
      {"hiv",
       {"molecules/hiv.csv.gz"},
       [](D dir, O o) { return detail::load_molecules("hiv", dir, o); }},
      {"bbbp",
       {"molecules/BBBP.csv"},
       [](D dir, O o) { return detail::load_molecules("bbbp", dir, o); }},
  };
  return table;
}

// The table's entry for `name`; unknown names throw with the list of known ones.
const DatasetKind& find_dataset(const std::string& name) {
  for (const auto& d : datasets())
    if (d.name == name) return d;
  std::string list;
  for (const auto& d : datasets()) list += (list.empty() ? "" : ", ") + d.name;
  throw InvalidInput("unknown dataset '" + name + "'; known datasets: " + list);
}

}  // namespace

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const auto& d : datasets()) names.push_back(d.name);
  return names;
}

OneHotCoding parse_onehot_coding(const std::string& name) {
  if (name == "full") return OneHotCoding::full;
  if (name == "drop-first") return OneHotCoding::drop_first;
  throw InvalidInput("unknown one-hot coding '" + name + "'; expected \"full\" or \"drop-first\"");
}

std::vector<std::string> dataset_files(const std::string& name) { return find_dataset(name).files; }

TrainTest load_dataset(const std::string& name, const LoadOptions& opts) {
  const DatasetKind& d = find_dataset(name);  // validates the name before touching the disk
  if (opts.heart_ca_categorical && !d.heart_ca)
    throw InvalidInput("load_dataset: heart_ca_categorical applies to 'heart-disease' only, not '" +
                       name + "'");
  const std::string dir = resolve_data_dir(opts.data_dir);
  if (opts.verify_checksums) verify_official_checksums(dir, d.files);
  return d.load(dir, opts);
}

SampleCounts sample_counts(const std::string& name, const LoadOptions& opts) {
  const DatasetKind& d = find_dataset(name);
  const auto& files = d.files;
  const std::string dir = resolve_data_dir(opts.data_dir);
  if (opts.verify_checksums) verify_official_checksums(dir, files);
  if (d.idx) {
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
  const TrainTest tt = d.load(dir, raw);
  return {tt.train.samples(), tt.test.samples()};
}

}  // namespace dcalign::data
