#pragma once
// A dcalign-server in the test process (insecure, loopback, port 0) with a fresh data
// directory, and helpers shared by the service tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "service/client.hpp"
#include "service/server.hpp"
#include "temp_dir.hpp"

namespace dcalign::service::testing {

namespace fs = std::filesystem;

inline const std::string kAnalystToken = "analyst-test-token-0123456789";

/// A directory removed at the end of the test.
using TempDir = dcalign::testing::TempDir;

inline ServerOptions test_options(const fs::path& data) {
  ServerOptions o;
  o.data_dir = data.string();
  o.analyst_token = kAnalystToken;
  o.insecure_localhost = true;
  o.device = "cpu";
  o.max_chunk_bytes = 4096;
  o.shutdown_grace_seconds = 2;
  return o;
}

inline Client client_for(int port, const std::string& token, std::uint64_t chunk = 4096) {
  ClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(port);
  o.token = token;
  o.insecure = true;
  o.deadline_seconds = 30;
  o.chunk_bytes = chunk;
  return Client(o);
}

/// a x l anchors for c participants, ODC's spec over them: alignment only.
inline v1::CollaborationSpec small_spec(int participants = 3, std::uint64_t a = 40,
                                        std::uint32_t l = 4) {
  v1::CollaborationSpec s;
  s.set_name("test");
  s.set_method("odc");
  s.set_dim(l);
  s.mutable_anchor()->set_kind("uniform");
  s.mutable_anchor()->set_rows(a);
  s.mutable_anchor()->set_features(10);
  s.mutable_anchor()->set_seed(1);
  for (int i = 0; i < participants; ++i) s.add_participants("p" + std::to_string(i));
  s.set_model("none");
  s.set_max_rows(100);
  s.set_seed(5);
  return s;
}

inline Matrix<double> random_matrix(index_t rows, index_t cols, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d;
  Matrix<double> m(rows, cols);
  for (index_t k = 0; k < m.size(); ++k) m.data()[k] = d(gen);
  return m;
}

/// A running in-process server.
struct LiveServer {
  explicit LiveServer(ServerOptions o) : server(std::make_unique<Server>(std::move(o))) {
    server->start();
  }
  ~LiveServer() { server->shutdown(); }
  int port() const { return server->port(); }
  std::unique_ptr<Server> server;
};

/// Expects `body` to throw RpcError with `code` and a message containing `words`.
template <typename F>
void expect_rpc_error(F&& body, grpc::StatusCode code, const std::string& words) {
  try {
    body();
    ADD_FAILURE() << "expected " << status_name(code) << " (" << words << "), got success";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code, code) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << "message '" << e.what() << "' lacks '" << words << "'";
  }
}

}  // namespace dcalign::service::testing
