#pragma once
// Output files that appear all together or not at all (used by the dcalign CLI).
//
// stage(path) checks the destination and returns a temporary name in the same directory
// (".<name>.tmp.<pid>.<n>"), which the caller writes; commit() then renames every temporary
// onto its destination, in the order staged. rename(2) replaces the directory entry itself: a
// symbolic link at the destination is replaced by the new file, never followed and truncated.
// Until commit(), nothing at any destination is touched; the destructor removes every
// temporary that was not committed, so a run that fails leaves no trace.
//
// Every destination is checked when it is staged, before any work: it must be a regular file
// (or a symbolic link, which is replaced) or not exist, must not be one of the run's inputs
// (protect()) or lie inside an input directory (a model being read), must not be or lie inside
// a directory output of the run (reserve_directory(), e.g. --model-out), and no two outputs may
// be the same. A device node, a FIFO or a socket is never replaced by a file.
#include <filesystem>
#include <string>
#include <vector>

namespace dcalign::io {

/// How stage() treats the destination.
enum class Stage {
  /// Any regular file (or symbolic link) there is replaced; the caller creates the temporary.
  replace,
  /// A secret written once (a token): the destination must not exist, the temporary is created
  /// at once with mode 0600 (O_EXCL, so never readable by others, and a read-only or full
  /// directory fails here, before any work), and commit() links it into place without ever
  /// replacing a file that appeared meanwhile.
  new_private,
};

class StagedOutputs {
 public:
  StagedOutputs() = default;
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  ~StagedOutputs();

  /// Registers an input of the run (`what` names its option): no output may replace it. With
  /// `tree`, `path` is a directory whose contents are all inputs (a model read by enroll).
  /// Call before stage(). Throws InvalidInput when an output staged already clashes.
  void protect(const std::string& path, const std::string& what, bool tree = false);

  /// Registers a directory written by other code (--model-out): no staged output may be it or
  /// lie inside it, nor may it be or contain an input. Throws InvalidInput.
  void reserve_directory(const std::string& path, const std::string& what);

  /// Validates `path` (`what` names the option in messages: see above) and returns the
  /// temporary path to write instead. Throws InvalidInput.
  std::string stage(const std::string& path, const std::string& what, Stage mode = Stage::replace);

  /// Renames every staged temporary onto its destination. Throws IoError naming the file.
  void commit();

 private:
  struct Entry {
    std::string dest, tmp, what;
    std::string entry;  ///< the directory entry the output replaces (canonical parent + name)
    Stage mode = Stage::replace;
  };
  struct Input {
    std::string entry, resolved, what;
    bool tree = false;
  };
  std::vector<Entry> entries_;
  std::vector<Input> inputs_;
  std::vector<Entry> directories_;
};

/// Throws InvalidInput unless `path` may be replaced by a new regular file: it does not exist,
/// or it is a regular file or a symbolic link. `what` names the option.
void check_replaceable_file(const std::string& path, const std::string& what);

// ---- Directories that dcalign writes whole (`dcalign client fetch`, the Python client's fetch).
// Such a directory carries a marker, kWrittenMarker: {"format": "dcalign-fetch",
// "format_version": 1, "files": [every regular file below it, relative, with '/'], ...}. It is
// replaced only when it is still exactly that: nothing else below it, no symbolic link. A user's
// own files are therefore never deleted, and a directory that merely looks like a result (it
// holds G.npy) is not replaced.

/// Flushes a file (or, best effort, a directory) to disk. Throws IoError naming a file that
/// cannot be opened or flushed.
void fsync_path(const std::filesystem::path& p, bool directory);

/// The marker's file name.
inline constexpr const char* kWrittenMarker = ".dcalign-fetch.json";

/// Throws InvalidInput (naming `what`, the path and the first entry in the way) unless `dir` may
/// become a directory that dcalign writes: it does not exist, or it is an empty directory, or a
/// directory with a valid marker and nothing but the files it lists (and their directories).
/// A symbolic link at `dir` is never followed.
void check_replaceable_directory(const std::string& dir, const std::string& what);

/// Writes the marker into `dir`, listing every regular file below it; `about` adds keys (e.g.
/// the collaboration). Flushes the files, the marker and the directories to disk.
void mark_written_directory(const std::string& dir, const std::string& about_json = "{}");

/// Moves the directory `tmp` to `dest`. An existing `dest` is swapped with it in one step
/// (renameat2 RENAME_EXCHANGE) or, where the file system cannot, moved aside first; `dest` is
/// always the old or the new directory. Returns where the old one now is ("" when there was
/// none); the caller disposes of it. Throws IoError naming `dest`.
std::string swap_into_place(const std::string& tmp, const std::string& dest);

/// Removes a directory that mark_written_directory marked, through its marker only: the listed
/// files, the marker, then the directories that are empty. Anything else (a file someone put
/// there since) stays, and so does the directory; false then.
bool remove_written_directory(const std::string& dir);

/// Temporaries that a signal must not leave behind: registered while being written (files, or
/// a directory of files for a model being saved) and removed by the handlers of
/// install_signal_cleanup(). The library registers its own temporaries; only a program installs
/// the handlers (the dcalign command line does).
void register_temporary(const std::string& path, bool directory = false);
void forget_temporary(const std::string& path);
/// On SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE and SIGXFSZ: removes every registered
/// temporary, then dies of the same signal (the default action).
void install_signal_cleanup();

}  // namespace dcalign::io
