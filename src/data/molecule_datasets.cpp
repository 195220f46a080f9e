// Morgan fingerprint matrices, their cache, and the MoleculeNet HIV and BBBP loaders. RDKit is
// reached through detail::parse_molecule only (molecules.cpp).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dcalign/checked.hpp"
#include "dcalign/error.hpp"
#include "file_io.hpp"
#include "molecules_internal.hpp"

namespace dcalign::data {

namespace fs = std::filesystem;

std::string resolve_cache_dir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (!env("DCALIGN_CACHE").empty()) return env("DCALIGN_CACHE");
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/dcalign";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/dcalign";
  return "";
}

namespace {

void check_options(const MorganOptions& o) {
  if (o.radius < 0 || o.radius > 8)
    throw InvalidInput("morgan_fingerprints: radius = " + std::to_string(o.radius) +
                       "; expected 0 to 8");
  if (o.bits < 1 || o.bits > 65536)
    throw InvalidInput("morgan_fingerprints: bits = " + std::to_string(o.bits) +
                       "; expected 1 to 65536");
}

// What the cache holds per molecule: its canonical SMILES and set bits (the labels are read from
// the source file every time).
struct Entry {
  index_t row = 0;
  detail::ParsedMolecule mol;
};

struct Parsed {
  std::vector<Entry> kept;
  std::vector<index_t> failed;
};

Parsed parse_all(const std::vector<std::string>& smiles, const MorganOptions& o) {
  Parsed p;
  for (size_t i = 0; i < smiles.size(); ++i) {
    auto mol = detail::parse_molecule(smiles[i], o);
    if (mol.ok)
      p.kept.push_back({static_cast<index_t>(i), std::move(mol)});
    else
      p.failed.push_back(static_cast<index_t>(i));
  }
  return p;
}

// Cache file layout (host byte order; the file is a private cache of this machine):
//   "dcalign-morgan-1\n", the source's SHA-256 (64 hex characters), int32 radius, int32 bits,
//   uint64 input rows, uint64 kept, uint64 failed; per kept molecule uint64 row, uint32 length
//   of the canonical SMILES and its bytes, uint32 count of set bits and the bits (uint32);
//   then the failed rows (uint64).
constexpr char kMagic[] = "dcalign-morgan-1\n";

class Reader {
 public:
  explicit Reader(std::ifstream& f) : f_(f) {}
  template <typename T>
  T get() {
    T v{};
    f_.read(reinterpret_cast<char*>(&v), sizeof v);
    if (!f_) throw IoError("truncated");
    return v;
  }
  std::string bytes(std::size_t n) {
    std::string s(n, '\0');
    f_.read(s.data(), static_cast<std::streamsize>(n));
    if (!f_) throw IoError("truncated");
    return s;
  }

 private:
  std::ifstream& f_;
};

// The cached parse when `path` holds one for this source and these options, else nothing (a
// missing, stale or damaged file is not an error: it is recomputed).
bool read_cache(const std::string& path, const std::string& sha, const MorganOptions& o,
                std::size_t inputs, Parsed& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  try {
    Reader r(f);
    if (r.bytes(sizeof kMagic - 1) != kMagic || r.bytes(64) != sha) return false;
    if (r.get<std::int32_t>() != o.radius || r.get<std::int32_t>() != o.bits) return false;
    if (r.get<std::uint64_t>() != inputs) return false;
    const auto kept = r.get<std::uint64_t>(), failed = r.get<std::uint64_t>();
    if (kept + failed != inputs) return false;
    Parsed p;
    p.kept.resize(kept);
    for (auto& e : p.kept) {
      e.row = static_cast<index_t>(r.get<std::uint64_t>());
      const auto len = r.get<std::uint32_t>();
      if (len > (1u << 20)) return false;
      e.mol.ok = true;
      e.mol.canonical = r.bytes(len);
      const auto n_on = r.get<std::uint32_t>();
      if (n_on > static_cast<std::uint32_t>(o.bits)) return false;
      for (std::uint32_t k = 0; k < n_on; ++k) {
        const auto b = r.get<std::uint32_t>();
        if (b >= static_cast<std::uint32_t>(o.bits)) return false;
        e.mol.on_bits.push_back(static_cast<int>(b));
      }
      if (e.row < 0 || static_cast<std::uint64_t>(e.row) >= inputs) return false;
    }
    for (std::uint64_t k = 0; k < failed; ++k) {
      const auto row = r.get<std::uint64_t>();
      if (row >= inputs) return false;
      p.failed.push_back(static_cast<index_t>(row));
    }
    if (f.peek() != std::char_traits<char>::eof()) return false;
    out = std::move(p);
    return true;
  } catch (const IoError&) {
    return false;
  }
}

// Written beside its destination and renamed over it, so that a reader never sees half a file.
// A cache that cannot be written is not an error (the next run recomputes).
void write_cache(const std::string& path, const std::string& sha, const MorganOptions& o,
                 std::size_t inputs, const Parsed& p) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;
    auto put = [&f](const auto& v) { f.write(reinterpret_cast<const char*>(&v), sizeof v); };
    f.write(kMagic, sizeof kMagic - 1);
    f.write(sha.data(), 64);
    put(static_cast<std::int32_t>(o.radius));
    put(static_cast<std::int32_t>(o.bits));
    put(static_cast<std::uint64_t>(inputs));
    put(static_cast<std::uint64_t>(p.kept.size()));
    put(static_cast<std::uint64_t>(p.failed.size()));
    for (const auto& e : p.kept) {
      put(static_cast<std::uint64_t>(e.row));
      put(static_cast<std::uint32_t>(e.mol.canonical.size()));
      f.write(e.mol.canonical.data(), static_cast<std::streamsize>(e.mol.canonical.size()));
      put(static_cast<std::uint32_t>(e.mol.on_bits.size()));
      for (int b : e.mol.on_bits) put(static_cast<std::uint32_t>(b));
    }
    for (index_t row : p.failed) put(static_cast<std::uint64_t>(row));
    f.close();
    if (!f) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

// At most 2^31 values in the matrix, checked before anything is parsed or allocated.
void check_size(std::size_t molecules, int bits) {
  if (checked_mul(static_cast<index_t>(molecules), static_cast<index_t>(bits),
                  "morgan_fingerprints: molecules x bits") > (index_t{1} << 31))
    throw InvalidInput("morgan_fingerprints: " + std::to_string(molecules) + " molecules x " +
                       std::to_string(bits) + " bits exceed 2^31 values");
}

Fingerprints to_matrix(Parsed&& p, const MorganOptions& o) {
  const index_t n = static_cast<index_t>(p.kept.size());
  Fingerprints out;
  out.X = Matrix<double>(n, o.bits);
  for (index_t i = 0; i < n; ++i) {
    auto& e = p.kept[static_cast<size_t>(i)];
    for (int b : e.mol.on_bits) out.X(i, b) = 1.0;
    out.canonical.push_back(std::move(e.mol.canonical));
    out.rows.push_back(e.row);
  }
  out.failed = std::move(p.failed);
  return out;
}

}  // namespace

Fingerprints morgan_fingerprints(const std::vector<std::string>& smiles, const MorganOptions& o) {
  check_options(o);
  check_size(smiles.size(), o.bits);
  return to_matrix(parse_all(smiles, o), o);
}

namespace detail {

namespace {

struct MoleculeSet {
  const char* file;    // relative to the data directory
  const char* header;  // the first line, as the file must have it
  std::vector<CsvColumn> columns;
  const char* smiles;  // column names
  const char* label;
  std::vector<std::string> class_names;
};

MoleculeSet molecule_set(const std::string& name) {
  if (name == "hiv")
    return {"molecules/hiv.csv.gz",
            "smiles,HIV_active",
            {{"smiles", ColumnType::categorical}, {"HIV_active", ColumnType::numeric}},
            "smiles",
            "HIV_active",
            {"inactive", "active"}};
  return {"molecules/BBBP.csv",
          "num,name,p_np,smiles",
          {{"num", ColumnType::ignore},
           {"name", ColumnType::ignore},
           {"p_np", ColumnType::numeric},
           {"smiles", ColumnType::categorical}},
          "smiles",
          "p_np",
          {"non-penetrating", "penetrating"}};
}

}  // namespace

TrainTest load_molecules(const std::string& name, const std::string& dir, const LoadOptions& opts) {
  const MoleculeSet set = molecule_set(name);
  const std::string path = dir + "/" + set.file;
  require_file(path);
  CsvOptions co;
  co.header_lines = 1;
  const CsvTable t = read_csv(path, set.columns, co);
  if (t.header.empty() || t.header[0] != set.header)
    throw IoError("'" + path + "': line 1 is '" + (t.header.empty() ? "" : t.header[0]) +
                  "'; expected the header '" + set.header + "'");
  size_t smiles_col = 0, label_col = 0;
  for (size_t c = 0; c < set.columns.size(); ++c) {
    if (set.columns[c].name == set.smiles) smiles_col = c;
    if (set.columns[c].name == set.label) label_col = c;
  }
  const auto& smiles = t.strings[smiles_col];
  const auto& labels = t.numbers[label_col];
  for (index_t r = 0; r < t.rows; ++r) {
    const double v = labels[static_cast<size_t>(r)];
    if (v != 0.0 && v != 1.0)
      throw IoError("'" + path + "': line " + std::to_string(t.lines[static_cast<size_t>(r)]) +
                    ": " + set.label + " = " + std::to_string(v) + "; expected 0 or 1");
    if (smiles[static_cast<size_t>(r)].empty())
      throw IoError("'" + path + "': line " + std::to_string(t.lines[static_cast<size_t>(r)]) +
                    ": empty SMILES");
  }
  const MorganOptions mo;  // paper 003: 2048 bits, radius 2
  check_size(smiles.size(), mo.bits);
  Parsed parsed;
  const std::string cache_dir = opts.cache ? resolve_cache_dir(opts.cache_dir) : "";
  const std::string sha = sha256_file(path);
  const std::string cache_file = cache_dir.empty() ? ""
                                                   : cache_dir + "/" + name + "_morgan_r" +
                                                         std::to_string(mo.radius) + "_" +
                                                         std::to_string(mo.bits) + ".bin";
  const size_t inputs = smiles.size();
  if (cache_file.empty() || !read_cache(cache_file, sha, mo, inputs, parsed)) {
    parsed = parse_all(smiles, mo);
    if (!cache_file.empty()) write_cache(cache_file, sha, mo, inputs, parsed);
  }
  Fingerprints fp = to_matrix(std::move(parsed), mo);

  TrainTest tt;
  Dataset& d = tt.train;
  d.name = name;
  d.X = std::move(fp.X);
  d.num_classes = 2;
  d.class_names = set.class_names;
  for (index_t r : fp.rows) d.y.push_back(labels[static_cast<size_t>(r)]);
  d.sample_ids = std::move(fp.canonical);
  for (int b = 0; b < mo.bits; ++b) d.feature_names.push_back("morgan" + std::to_string(b));
  std::ostringstream note;
  note << name << ": " << t.rows << " molecules in '" << set.file << "', 2048-bit Morgan "
       << "fingerprints of radius 2 (RDKit)";
  if (!fp.failed.empty()) {
    note << "; " << fp.failed.size() << " SMILES RDKit cannot read left out (file lines";
    for (size_t k = 0; k < fp.failed.size() && k < 20; ++k)
      note << " " << t.lines[static_cast<size_t>(fp.failed[k])];
    if (fp.failed.size() > 20) note << " ...";
    note << ")";
  }
  d.note = note.str();
  tt.test = d;
  tt.test.X = Matrix<double>(0, d.features());
  tt.test.y.clear();
  tt.test.sample_ids.clear();
  return tt;
}

}  // namespace detail
}  // namespace dcalign::data
