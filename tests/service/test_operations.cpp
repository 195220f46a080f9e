// What an operator does to a dcalign-server: check a config file before starting it, rotate
// the analyst token with SIGHUP, back up and restore the data directory, upgrade the server.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server_process.hpp"
#include "service/common.hpp"
#include "service/store.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

struct Output {
  int status = -1;
  std::string text;  ///< stdout and stderr
};

Output run_server(const std::string& args) {
  Output out;
  const std::string cmd = std::string(DCALIGN_SERVER_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.text.append(buf, n);
  const int st = ::pclose(p);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(ServiceOperations, CheckConfigValidatesAFileAndExits) {
  TempDir dir;
  { std::ofstream(dir.path / "token") << kAnalystToken << "\n"; }
  const fs::path data = dir.path / "data";
  const auto write_config = [&](const std::string& extra) {
    std::ofstream(dir.path / "server.toml")
        << "# dcalign-server\n"
        << "data-dir = \"" << data.string() << "\"\n"
        << "analyst-token-file = \"" << (dir.path / "token").string() << "\"\n"
        << "insecure-localhost = true\n"
        << "listen = \"127.0.0.1:0\"\n"
        << (extra.find("metrics-listen") == std::string::npos ? "metrics-listen = \"127.0.0.1:0\"\n"
                                                              : "")
        << extra;
    return "--config " + (dir.path / "server.toml").string() + " --check-config";
  };
  Output ok = run_server(write_config("device = \"cpu\"\ncpu-workers = 3\n"));
  EXPECT_EQ(ok.status, 0) << ok.text;
  EXPECT_NE(ok.text.find("the configuration is valid"), std::string::npos) << ok.text;
  EXPECT_NE(ok.text.find("workers: cpu0 ("), std::string::npos) << ok.text;
  EXPECT_NE(ok.text.find("cpu2 ("), std::string::npos) << ok.text;
  EXPECT_FALSE(fs::exists(data)) << "--check-config must not create the data directory";

  // Each mistake is named, with a non-zero exit and nothing started.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"device = \"cpu\"\ncpu-workers = 0\n", "--cpu-workers 0 without GPU workers"},
      {"device = \"cpu\"\ndevices = \"0\"\n", "--devices asks for GPU workers"},
      {"device = \"tpu\"\n", "--device 'tpu'"},
      {"cpu-workers = 5000\n", "--cpu-workers"},
      {"idle-timeout = -1\n", "--idle-timeout"},
      {"no-such-option = 1\n", "no-such-option"},
  };
  for (const auto& [extra, words] : bad) {
    const Output o = run_server(write_config(extra));
    EXPECT_NE(o.status, 0) << extra << o.text;
    EXPECT_NE(o.text.find(words), std::string::npos) << extra << "\n" << o.text;
    // The error alone: no success line begun before the check failed.
    EXPECT_EQ(o.text.find("the configuration is valid"), std::string::npos) << extra << o.text;
    EXPECT_FALSE(fs::exists(data));
  }
  // The metrics on another host than loopback need TLS, which --insecure-localhost is not.
  Output open = run_server(write_config("metrics-listen = \"0.0.0.0:9464\"\n"));
  EXPECT_NE(open.status, 0);
  EXPECT_NE(open.text.find("is not a loopback address"), std::string::npos) << open.text;
  // A token file that is not there is named.
  fs::remove(dir.path / "token");
  Output missing = run_server(write_config(""));
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.text.find((dir.path / "token").string()), std::string::npos) << missing.text;
  // The command line wins over the file.
  { std::ofstream(dir.path / "token") << kAnalystToken << "\n"; }
  Output cli = run_server(write_config("device = \"cpu\"\ncpu-workers = 0\n") + " --cpu-workers 1");
  EXPECT_EQ(cli.status, 0) << cli.text;
}

bool analyst_accepted(int port, const std::string& token) {
  try {
    client_for(port, token).create(small_spec(1));
    return true;
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code, StatusCode::UNAUTHENTICATED) << e.what();
    return false;
  }
}

TEST(ServiceOperations, SighupRotatesTheAnalystToken) {
  TempDir dir;
  ServerProcess server(dir.path);
  ASSERT_TRUE(analyst_accepted(server.port(), kAnalystToken));
  const std::string fresh = "rotated-analyst-token-0123456789";
  { std::ofstream(dir.path / "analyst.token", std::ios::trunc) << fresh << "\n"; }
  server.signal(SIGHUP);
  bool rotated = false;
  for (int i = 0; i < 200 && !rotated; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    rotated = server.log().find("analyst_token_rotated") != std::string::npos;
  }
  ASSERT_TRUE(rotated) << server.log();
  EXPECT_FALSE(analyst_accepted(server.port(), kAnalystToken));  // the old one is refused
  EXPECT_TRUE(analyst_accepted(server.port(), fresh));

  // A bad file keeps the token in use, and the log says why.
  { std::ofstream(dir.path / "analyst.token", std::ios::trunc) << "short\n"; }
  server.signal(SIGHUP);
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    refused = server.log().find("analyst_token_not_rotated") != std::string::npos;
  }
  EXPECT_TRUE(refused) << server.log();
  EXPECT_TRUE(analyst_accepted(server.port(), fresh));
  // The server keeps serving and stops cleanly.
  server.signal(SIGTERM);
  EXPECT_EQ(server.exit_code_within(20), 0) << server.log();
}

// Runs `sql` on the database file `db` (a test's own connection).
void sql(const fs::path& db, const std::string& text) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, text.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
}

int user_version(const fs::path& db) {
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, nullptr);
  const int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

// A data directory as dcalign 0.3's server left it in `data`: schema version 1 (no
// user_version), collaboration `id` whose job is done, with p0's result and its `token`.
void write_version1_data_dir(const fs::path& data, const std::string& id,
                             const std::string& token) {
  fs::create_directories(data / "collaborations" / id / "uploads");
  fs::create_directories(data / "collaborations" / id / "results" / "p0");
  { std::ofstream(data / "collaborations" / id / "results" / "p0" / "report.json") << "{}"; }
  { std::ofstream(data / "collaborations" / id / "results" / "p0" / "G.npy") << "G"; }
  const std::string spec = small_spec(1).SerializeAsString();
  std::string hex;
  for (unsigned char ch : spec) {
    static const char* digits = "0123456789abcdef";
    hex += digits[ch >> 4];
    hex += digits[ch & 15];
  }
  sql(data / "dcalign.db", R"sql(
PRAGMA journal_mode=WAL;
CREATE TABLE collaborations (id TEXT PRIMARY KEY, spec BLOB NOT NULL, created REAL NOT NULL);
CREATE TABLE participants (collaboration TEXT NOT NULL, name TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE, PRIMARY KEY (collaboration, name));
CREATE TABLE revoked_tokens (token_hash TEXT PRIMARY KEY, collaboration TEXT);
CREATE TABLE parts (collaboration TEXT NOT NULL, participant TEXT NOT NULL, part INTEGER NOT NULL,
  rows INTEGER NOT NULL, cols INTEGER NOT NULL, total INTEGER NOT NULL, received INTEGER NOT NULL,
  sha256 TEXT NOT NULL, complete INTEGER NOT NULL, PRIMARY KEY (collaboration, participant, part));
CREATE TABLE deleted_collaborations (id TEXT PRIMARY KEY, deleted REAL NOT NULL);
CREATE TABLE jobs (collaboration TEXT PRIMARY KEY, state TEXT NOT NULL, attempts INTEGER NOT NULL,
  error TEXT NOT NULL, report TEXT NOT NULL, updated REAL NOT NULL);
)sql" + std::string("INSERT INTO collaborations VALUES ('") +
                               id + "', X'" + hex + "', 1);" +
                               "INSERT INTO participants VALUES ('" + id + "', 'p0', '" +
                               sha256_hex(token) + "');" + "INSERT INTO jobs VALUES ('" + id +
                               "', 'done', 1, '', '{\"old\": true}', 1);");
}

TEST(ServiceOperations, ANewerServerOpensAnOlderDataDirectory) {
  TempDir dir;
  const fs::path data = dir.path / "data";
  const std::string id = "c" + std::string(32, 'a'), token = "dca_" + std::string(43, 'T');
  write_version1_data_dir(data, id, token);
  ASSERT_EQ(user_version(data / "dcalign.db"), 0);
  {
    LiveServer server(test_options(data));
    const auto st = client_for(server.port(), token).status(id);
    EXPECT_EQ(st.job_state(), "done");
    EXPECT_EQ(st.job_report(), "{\"old\": true}");
    // A late participant needs the fitted alignment, which version 1's jobs did not keep: the
    // refusal says so.
    expect_rpc_error(
        [&] { client_for(server.port(), kAnalystToken).add_participant(id, "newcomer"); },
        StatusCode::FAILED_PRECONDITION, "keeps no fitted alignment");
  }
  EXPECT_EQ(user_version(data / "dcalign.db"), Store::kSchemaVersion);
  EXPECT_NE(file_bytes(data / "collaborations" / id / "results" / "p0" / "G.npy"), "");
}

TEST(ServiceOperations, AnOlderServerRefusesANewerDataDirectory) {
  TempDir dir;
  { LiveServer server(test_options(dir.path / "data")); }
  ASSERT_EQ(user_version(dir.path / "data" / "dcalign.db"), Store::kSchemaVersion);
  // As a later dcalign-server would leave it.
  sql(dir.path / "data" / "dcalign.db", "PRAGMA user_version = 3");
  Server server(test_options(dir.path / "data"));
  try {
    server.start();
    ADD_FAILURE() << "the server started on a newer database";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("has schema version 3, written by a newer "
                                         "dcalign-server; this one reads versions 1 to 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(user_version(dir.path / "data" / "dcalign.db"), 3);  // untouched
}

TEST(ServiceOperations, ABackupKeepsTheSchemaVersionOfItsSource) {
  // Taken before an upgrade, a backup is the way back to the older server: the copy of a
  // version-1 directory stays version 1, with its results.
  TempDir dir;
  const std::string id = "c" + std::string(32, 'b'), token = "dca_" + std::string(43, 'U');
  write_version1_data_dir(dir.path / "data", id, token);
  const Output out = run_server("--data-dir " + (dir.path / "data").string() + " --backup-to " +
                                (dir.path / "backup").string());
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("backup: 1 collaborations, 2 files"), std::string::npos) << out.text;
  EXPECT_EQ(user_version(dir.path / "backup" / "dcalign.db"), 0);
  EXPECT_EQ(file_bytes(dir.path / "backup" / "collaborations" / id / "results" / "p0" / "G.npy"),
            "G");
  // A directory of a newer server is not this server's to copy.
  sql(dir.path / "data" / "dcalign.db", "PRAGMA user_version = 3");
  const Output newer = run_server("--data-dir " + (dir.path / "data").string() + " --backup-to " +
                                  (dir.path / "backup3").string());
  EXPECT_NE(newer.status, 0);
  EXPECT_NE(newer.text.find("has schema version 3, written by a newer dcalign-server: back it up "
                            "with that server"),
            std::string::npos)
      << newer.text;
  EXPECT_FALSE(fs::exists(dir.path / "backup3"));
}

TEST(ServiceOperations, AnOnlineBackupRestoresIntoAFreshDirectory) {
  TempDir dir;
  std::string c1, c2, late_token;
  std::vector<std::string> tokens1, tokens2;
  {
    ServerProcess server(dir.path);
    auto analyst = client_for(server.port(), kAnalystToken);
    const Created a = create(server.port(), 3), b = create(server.port(), 2);
    c1 = a.id;
    c2 = b.id;
    tokens1 = a.tokens;
    tokens2 = b.tokens;
    for (int i = 0; i < 3; ++i)
      client_for(server.port(), tokens1[i])
          .upload(c1, v1::PART_ANCHOR, random_matrix(80, 4, 60 + i));
    ASSERT_EQ(wait_for_job(server.port(), c1), "done");
    late_token = analyst.add_participant(c1, "late").token();
    client_for(server.port(), late_token).upload(c1, v1::PART_ANCHOR, random_matrix(80, 4, 99));
    client_for(server.port(), tokens2[0]).upload(c2, v1::PART_ANCHOR, random_matrix(80, 4, 70));
    for (int i = 0; i < 500; ++i) {
      const auto st = analyst.status(c1);
      if (st.participants(3).enrolment_state() == "done") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // While the server runs.
    const Output out = run_server("--data-dir " + (dir.path / "data").string() + " --backup-to " +
                                  (dir.path / "backup").string());
    ASSERT_EQ(out.status, 0) << out.text;
    EXPECT_NE(out.text.find("backup: 2 collaborations"), std::string::npos) << out.text;
    const Output again = run_server("--data-dir " + (dir.path / "data").string() + " --backup-to " +
                                    (dir.path / "backup").string());
    EXPECT_NE(again.status, 0);
    EXPECT_NE(again.text.find("exists: a backup goes to a new directory"), std::string::npos)
        << again.text;
    EXPECT_EQ(again.text.find("dcalign-server: backup:"), std::string::npos) << again.text;
    const Output inside = run_server("--data-dir " + (dir.path / "data").string() +
                                     " --backup-to " + (dir.path / "data" / "copy").string());
    EXPECT_NE(inside.status, 0);
    EXPECT_NE(inside.text.find("is inside the data directory"), std::string::npos) << inside.text;
    EXPECT_EQ(inside.text.find("dcalign-server: backup:"), std::string::npos) << inside.text;
    EXPECT_FALSE(fs::exists(dir.path / "data" / "copy"));
    for (const auto& [token, name] :
         {std::pair<std::string, std::string>{tokens1[0], "p0"}, {late_token, "late"}})
      client_for(server.port(), token).fetch(c1, (dir.path / ("before_" + name)).string());
  }
  // Restore: a server on the copy, after the original is gone.
  fs::remove_all(dir.path / "data");
  Launch restored;
  restored.data = dir.path / "backup";
  ServerProcess server(dir.path, "", restored);
  for (const auto& [token, name] :
       {std::pair<std::string, std::string>{tokens1[0], "p0"}, {late_token, "late"}}) {
    client_for(server.port(), token).fetch(c1, (dir.path / ("after_" + name)).string());
    for (const char* f : {"G.npy", "report.json"})
      EXPECT_EQ(file_bytes(dir.path / ("after_" + name) / f),
                file_bytes(dir.path / ("before_" + name) / f))
          << name << " " << f;
  }
  // The collaboration in progress goes on where it was.
  const auto st = client_for(server.port(), kAnalystToken).status(c2);
  EXPECT_TRUE(st.participants(0).uploaded());
  EXPECT_FALSE(st.participants(1).uploaded());
  client_for(server.port(), tokens2[1]).upload(c2, v1::PART_ANCHOR, random_matrix(80, 4, 71));
  EXPECT_EQ(wait_for_job(server.port(), c2), "done") << server.log();
}

TEST(ServiceOperations, TheLogTellsACollaborationsHistoryWithoutTokensOrNames) {
  TempDir dir;
  ServerProcess server(dir.path);
  const Created c = create(server.port(), 2);
  for (int i = 0; i < 2; ++i)
    client_for(server.port(), c.tokens[i]).upload(c.id, v1::PART_ANCHOR, random_matrix(80, 4, i));
  ASSERT_EQ(wait_for_job(server.port(), c.id), "done");
  const std::string late =
      client_for(server.port(), kAnalystToken).add_participant(c.id, "latecomer").token();
  client_for(server.port(), late).upload(c.id, v1::PART_ANCHOR, random_matrix(80, 4, 9));
  client_for(server.port(), c.tokens[1]).fetch(c.id, (dir.path / "out").string());
  server.signal(SIGTERM);
  ASSERT_EQ(server.exit_code_within(20), 0);
  const std::string log = server.log();
  std::map<std::string, int> seen;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    for (const auto& t : c.tokens) EXPECT_EQ(line.find(t), std::string::npos) << line;
    EXPECT_EQ(line.find(late), std::string::npos) << line;
    EXPECT_EQ(line.find(kAnalystToken), std::string::npos) << line;
    EXPECT_EQ(line.find("latecomer"), std::string::npos) << line;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    const std::string event = j.value("event", "");
    if (j.value("collaboration", "") != c.id) continue;
    ++seen[event];
    EXPECT_FALSE(j.contains("participant")) << line;  // an index, never a name
    if (event.rfind("job_", 0) == 0) {
      EXPECT_TRUE(j.contains("job")) << line;
    }
    if (event == "part_uploaded" || event == "participant_added") {
      EXPECT_TRUE(j.contains("participant_index")) << line;
    }
  }
  // The whole history: creation, three uploads, the job, the late participant and its enrolment.
  EXPECT_EQ(seen["collaboration_created"], 1);
  EXPECT_EQ(seen["part_uploaded"], 3);
  EXPECT_EQ(seen["job_queued"], 2);
  EXPECT_EQ(seen["job_started"], 2);
  EXPECT_EQ(seen["job_done"], 2);
  EXPECT_EQ(seen["participant_added"], 1);
}

}  // namespace
}  // namespace dcalign::service::testing
