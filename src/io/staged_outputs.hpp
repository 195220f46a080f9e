#pragma once
// Output files that appear all together or not at all (used by the dcalign CLI).
//
// stage(path) checks the destination and returns a temporary name in the same directory
// (".<name>.tmp.<pid>.<n>"), which the caller writes; commit() then renames every temporary
// onto its destination, in the order staged. rename(2) replaces the directory entry itself: a
// symbolic link at the destination is replaced by the new file, never followed and truncated.
// Until commit(), nothing at any destination is touched; the destructor removes every
// temporary that was not committed, so a run that fails leaves no trace.
#include <string>
#include <vector>

namespace dcalign::io {

class StagedOutputs {
 public:
  StagedOutputs() = default;
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  ~StagedOutputs();

  /// Validates `path` (`what` names the option in messages: its directory must exist, it must
  /// not be a directory, and no other output may have the same path) and returns the temporary
  /// path to write instead. Throws InvalidInput.
  std::string stage(const std::string& path, const std::string& what);

  /// Renames every staged temporary onto its destination. Throws IoError naming the file.
  void commit();

 private:
  struct Entry {
    std::string dest, tmp, what;
  };
  std::vector<Entry> entries_;
};

}  // namespace dcalign::io
