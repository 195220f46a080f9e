// Fuzzes the output rules of the command line and the client (src/io/staged_outputs.hpp) on
// real trees: the input describes a small tree of files, directories, symbolic links and a
// marker (its text from the input) inside a scratch directory, with a sentinel file beside it.
// Invariants:
//   * check_replaceable_directory accepts only a new or empty directory, or one whose every
//     entry is the marker, a regular file the marker lists, or a directory above such a file;
//     it refuses with InvalidInput, nothing else;
//   * remove_written_directory removes nothing outside the directory (the sentinel survives)
//     and no file the marker does not list;
//   * StagedOutputs never hands out a temporary that is an input, and refuses with InvalidInput.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "io/staged_outputs.hpp"

namespace {

namespace fs = std::filesystem;
using dcalign::io::kWrittenMarker;

const char* const kNames[] = {"G.npy", "model", "x", ".hidden", "report.json", "a b"};

struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(p), n);
    n = 0;
    return s;
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path root =
      fs::temp_directory_path() / ("dcalign_fuzz_outputs_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root / "out");
  { std::ofstream(root / "sentinel") << "keep"; }
  Reader in{data, size};

  // Up to 12 entries, each at depth 0 or 1 under out/.
  const int entries = in.byte() % 13;
  for (int k = 0; k < entries; ++k) {
    const std::uint8_t what = in.byte(), a = in.byte(), b = in.byte();
    fs::path rel = kNames[a % 6];
    if (what & 8) rel = fs::path(kNames[b % 6]) / rel;
    const fs::path at = root / "out" / rel;
    fs::create_directories(at.parent_path(), ec);
    // The harness itself never writes through a link it made (the sentinel is the invariant).
    if (fs::exists(fs::symlink_status(at, ec)) ||
        !fs::is_directory(fs::symlink_status(at.parent_path(), ec)))
      continue;
    switch (what % 4) {
      case 0:
        std::ofstream(at) << "data";
        break;
      case 1:
        fs::create_directories(at, ec);
        break;
      case 2:
        fs::create_symlink(b & 1 ? root / "sentinel" : fs::path("../x"), at, ec);
        break;
      default:
        break;
    }
  }
  // The marker: the input's own text, or a list of the names chosen above.
  const std::uint8_t marker_kind = in.byte();
  const std::string text = in.rest();
  if (fs::exists(fs::symlink_status(root / "out" / kWrittenMarker, ec))) {
    // (never: no entry has the marker's name)
  } else if (marker_kind % 3 == 0) {
    std::ofstream(root / "out" / kWrittenMarker) << text;
  } else if (marker_kind % 3 == 1) {
    std::string list;
    for (const char* n : kNames) list += std::string(list.empty() ? "" : ",") + "\"" + n + "\"";
    std::ofstream(root / "out" / kWrittenMarker)
        << R"({"format": "dcalign-fetch", "format_version": 1, "files": [)" << list
        << R"(, "../sentinel", "model/x"]})";
  }

  bool accepted = false;
  try {
    dcalign::io::check_replaceable_directory((root / "out").string(), "--out");
    accepted = true;
  } catch (const dcalign::InvalidInput&) {
  }
  if (accepted) {
    // Every entry must be what the rule allows: no symbolic link, nothing unlisted.
    const bool has_marker = fs::exists(fs::symlink_status(root / "out" / kWrittenMarker));
    for (auto it = fs::recursive_directory_iterator(root / "out"); it != fs::end(it); ++it) {
      const auto type = it->symlink_status().type();
      if (type == fs::file_type::symlink) std::abort();
      if (type == fs::file_type::regular && !has_marker) std::abort();
    }
    // Removal through the marker: the sentinel beside the directory survives.
    dcalign::io::remove_written_directory((root / "out").string());
    if (read_file(root / "sentinel") != "keep") std::abort();
  }

  // Staging against the same tree: a temporary is never an input.
  try {
    dcalign::io::StagedOutputs out;
    out.protect((root / "out" / kNames[size % 6]).string(), "--in");
    const std::string tmp =
        out.stage((root / "out" / kNames[(size / 6) % 6]).string(), "--out",
                  size % 2 ? dcalign::io::Stage::new_private : dcalign::io::Stage::replace);
    if (tmp == (root / "out" / kNames[size % 6]).string()) std::abort();
  } catch (const dcalign::InvalidInput&) {
  }
  if (read_file(root / "sentinel") != "keep") std::abort();
  fs::remove_all(root, ec);
  return 0;
}
