#pragma once
// An experiment's checkpoint: a directory that holds every finished trial's records, each in a
// file of its own written at once and atomically (a temporary, flushed, then renamed), and a
// manifest with the fingerprint of what produced them (the config, the build, each point's
// data). A resumed run reads the trials back and runs only the others; a run of another config,
// build or data is refused, naming the difference.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dcalign/experiment.hpp"

namespace dcalign::experiment::detail {

/// One trial's results: point k (0 without a sweep), trial t.
struct UnitResult {
  std::size_t point = 0;
  index_t trial = 0;
  std::vector<Record> records;
  std::vector<RoundRecord> rounds;
};

/// Text of one trial's results and back, every double exactly (17 significant digits; NaN and
/// the infinities as strings). Throws InvalidInput for a malformed document, naming `where`.
std::string unit_json(const UnitResult& u, const std::string& fingerprint);
UnitResult parse_unit(const std::string& text, const std::string& fingerprint,
                      const std::string& where);

class Checkpoint {
 public:
  /// `dir`: the checkpoint's directory. `config`: the run's config. `data`: each point's data
  /// fingerprint, in point order.
  Checkpoint(std::string dir, const Config& config, std::vector<std::uint64_t> data);

  /// Resuming: reads the manifest and every trial file that matches it. Throws InvalidInput
  /// naming the first difference (a config key, the build, a point's data) when the directory
  /// holds another run's trials, and IoError when it cannot be read. A missing directory
  /// resumes nothing.
  std::vector<UnitResult> load() const;
  /// Starting afresh: refuses (InvalidInput) a directory that holds finished trials unless
  /// `discard`, then empties it of them and writes the manifest.
  void start(bool discard) const;
  /// After a resume: the manifest again (the trial count may have grown).
  void write_manifest() const;
  /// One finished trial, atomically. Throws IoError.
  void save(const UnitResult& u) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string unit_path(std::size_t point, index_t trial) const;
  std::string manifest_text() const;
  std::vector<std::string> unit_files() const;

  std::string dir_;
  std::string manifest_;     // the JSON of what produced the trials
  std::string fingerprint_;  // its hash, in every trial file
  std::vector<std::uint64_t> data_;
};

/// The config as a JSON object of every key that changes a record (not trials, threads, the
/// file's name or the data's directory), for the manifest.
std::string config_fingerprint_json(const Config& config);

}  // namespace dcalign::experiment::detail
