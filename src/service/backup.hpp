#pragma once
// An online backup of dcalign-server's data directory (dcalign-server --backup-to): the
// database first, by SQLite's backup API (a consistent snapshot, taken while the server runs),
// then the files that snapshot refers to. Matrices are never rewritten in place (a part is
// renamed complete once, results are published by one rename), so a file the snapshot names is
// either the one it meant or gone with a collaboration deleted since; the latter is dropped
// from the copy. Restoring is starting a server on the copy: its start-up recovery re-queues
// the jobs that were running and cuts uploads in progress back to zero (their partial files are
// not copied).
#include <filesystem>
#include <string>

namespace dcalign::service {

/// Copies the data directory `from` to `to` (which must not exist; it appears whole, by one
/// rename, once the copy is complete and flushed). Throws InvalidInput for a bad destination or
/// a directory without a database, IoError for a failed read or write. Returns a one-line
/// summary: collaborations, files and bytes copied.
std::string backup_data_dir(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace dcalign::service
