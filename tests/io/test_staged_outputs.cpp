// The output rules shared by every command (io/staged_outputs.hpp): new private files, written
// directories that are replaced only when they hold nothing but what dcalign wrote, and
// temporaries that a signal removes, nested ones included.
#include "io/staged_outputs.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "dcalign/error.hpp"
#include "temp_dir.hpp"

namespace dcalign::io {
namespace {

namespace fs = std::filesystem;
using dcalign::testing::TempDir;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// A written directory as a fetch leaves it: files, a subdirectory, the marker.
void written(const fs::path& d) {
  write(d / "G.npy", "g");
  write(d / "model" / "model.json", "{}");
  mark_written_directory(d.string(), R"({"collaboration": "c1"})");
}

void expect_refused(const fs::path& d, const std::string& words) {
  try {
    check_replaceable_directory(d.string(), "--out");
    ADD_FAILURE() << d << " was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(WrittenDirectories, OnlyNewEmptyOrUntouchedWrittenDirectoriesMayBeReplaced) {
  TempDir t;
  EXPECT_NO_THROW(check_replaceable_directory((t.path / "new").string(), "--out"));
  fs::create_directories(t.path / "empty");
  EXPECT_NO_THROW(check_replaceable_directory((t.path / "empty").string(), "--out"));
  written(t.path / "w");
  EXPECT_NO_THROW(check_replaceable_directory((t.path / "w").string(), "--out"));
  EXPECT_NE(read(t.path / "w" / kWrittenMarker).find("\"model/model.json\""), std::string::npos);

  write(t.path / "looks" / "G.npy", "g");  // looks like a result, has no marker
  expect_refused(t.path / "looks", "holds 'G.npy', which a fetch did not write");
  written(t.path / "added");
  write(t.path / "added" / "model" / "notes.txt", "mine");
  expect_refused(t.path / "added", "'model/notes.txt', which a fetch did not write");
  written(t.path / "linked");
  fs::create_symlink("/etc/passwd", t.path / "linked" / "model" / "x");
  expect_refused(t.path / "linked", "the symbolic link 'model/x'");
  fs::create_directory_symlink(t.path / "w", t.path / "dirlink");
  expect_refused(t.path / "dirlink", "is a symbolic link");
  write(t.path / "file", "x");
  expect_refused(t.path / "file", "is not a directory");
  written(t.path / "forged");
  write(t.path / "forged" / kWrittenMarker, R"({"format": "something-else", "files": []})");
  expect_refused(t.path / "forged", "not one of dcalign's");
  // A marker of the wrong types is data like any other (fuzz_outputs found a throw here).
  write(t.path / "forged" / kWrittenMarker, R"({"format": 0, "files": ["G.npy"]})");
  expect_refused(t.path / "forged", "not one of dcalign's");
  write(t.path / "forged" / kWrittenMarker,
        R"({"format": "dcalign-fetch", "format_version": 1, "files": [1]})");
  expect_refused(t.path / "forged", "not one of dcalign's");
}

TEST(WrittenDirectories, TheOldDirectoryIsRemovedThroughItsMarkerOnly) {
  TempDir t;
  written(t.path / "old");
  write(t.path / "old" / "model" / "late.txt", "added after the check");
  EXPECT_FALSE(remove_written_directory((t.path / "old").string()));
  EXPECT_EQ(read(t.path / "old" / "model" / "late.txt"), "added after the check");
  EXPECT_FALSE(fs::exists(t.path / "old" / "G.npy"));
  // A marker naming a path outside is not followed.
  write(t.path / "outside.txt", "keep");
  written(t.path / "evil");
  write(
      t.path / "evil" / kWrittenMarker,
      R"({"format": "dcalign-fetch", "format_version": 1, "files": ["../outside.txt", "G.npy"]})");
  fs::remove_all(t.path / "evil" / "model");
  EXPECT_TRUE(remove_written_directory((t.path / "evil").string()));
  EXPECT_EQ(read(t.path / "outside.txt"), "keep");
  // A clean one goes entirely.
  written(t.path / "clean");
  EXPECT_TRUE(remove_written_directory((t.path / "clean").string()));
  EXPECT_FALSE(fs::exists(t.path / "clean"));
}

TEST(WrittenDirectories, SwapIntoPlaceReturnsTheOldDirectory) {
  TempDir t;
  written(t.path / "dest");
  write(t.path / "tmp" / "G.npy", "new");
  const std::string old = swap_into_place((t.path / "tmp").string(), (t.path / "dest").string());
  EXPECT_EQ(read(t.path / "dest" / "G.npy"), "new");
  ASSERT_FALSE(old.empty());
  EXPECT_EQ(read(fs::path(old) / "G.npy"), "g");
  write(t.path / "tmp2" / "G.npy", "x");
  EXPECT_EQ(swap_into_place((t.path / "tmp2").string(), (t.path / "fresh").string()), "");
  EXPECT_EQ(read(t.path / "fresh" / "G.npy"), "x");
}

TEST(StagedOutputs, ANewPrivateFileIsCreatedAtOnceAndNeverReplacesOne) {
  TempDir t;
  {
    StagedOutputs out;
    out.protect((t.path / "in.token").string(), "--token-file");
    EXPECT_THROW(out.stage((t.path / "in.token").string(), "--token-out", Stage::new_private),
                 InvalidInput);
    const std::string tmp =
        out.stage((t.path / "new.token").string(), "--token-out", Stage::new_private);
    struct stat st {};
    ASSERT_EQ(::stat(tmp.c_str(), &st), 0);  // exists before anything is written
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    std::ofstream(tmp) << "secret";
    // A file that appears meanwhile is not replaced.
    write(t.path / "new.token", "someone else's");
    EXPECT_THROW(out.commit(), IoError);
    EXPECT_EQ(read(t.path / "new.token"), "someone else's");
  }
  // The temporary went with the failed commit's object.
  for (const auto& e : fs::directory_iterator(t.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  write(t.path / "exists.token", "old");
  StagedOutputs out;
  try {
    out.stage((t.path / "exists.token").string(), "--token-out", Stage::new_private);
    ADD_FAILURE() << "an existing file was staged";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("never written over a file"), std::string::npos);
  }
}

// A signal while a directory with subdirectories is under construction removes all of it, and
// the process still dies of the signal.
TEST(SignalCleanup, ANestedTemporaryDirectoryGoesWithTheProcess) {
  TempDir t;
  const fs::path tmp = t.path / ".result.fetch-1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    write(tmp / "G.npy", "g");
    write(tmp / "model" / "model.json", "{}");
    write(tmp / "model" / "deeper" / "w.npy", "w");
    register_temporary(tmp.string(), true);
    install_signal_cleanup();
    ::raise(SIGTERM);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_FALSE(fs::exists(tmp));
}

}  // namespace
}  // namespace dcalign::io
