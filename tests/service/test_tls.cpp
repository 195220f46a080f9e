// TLS: the server takes a certificate and key; a client that trusts it talks to it; a plaintext
// client, or one that does not trust the certificate, is refused.
#include <gtest/gtest.h>

#include <cstdlib>

#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

struct TlsServer {
  TempDir dir;
  std::unique_ptr<LiveServer> server;
  TlsServer() {
    const std::string cmd = std::string("bash ") + DCALIGN_DEV_CERT_SCRIPT + " " +
                            (dir.path / "cert").string() + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("scripts/dev-cert.sh failed");
    auto o = test_options(dir.path / "data");
    o.insecure_localhost = false;
    o.tls_cert_file = (dir.path / "cert" / "server.crt").string();
    o.tls_key_file = (dir.path / "cert" / "server.key").string();
    server = std::make_unique<LiveServer>(o);
  }
  Client client(bool insecure, bool trust) const {
    ClientOptions o;
    o.target = "127.0.0.1:" + std::to_string(server->port());
    o.token = kAnalystToken;
    o.insecure = insecure;
    if (trust) o.ca_cert_file = (dir.path / "cert" / "server.crt").string();
    o.deadline_seconds = 10;
    return Client(o);
  }
};

TEST(ServiceTls, ATrustingClientTalksOverTls) {
  TlsServer tls;
  auto c = tls.client(false, true);
  const auto r = c.create(small_spec(2));
  EXPECT_EQ(r.tokens_size(), 2);
  EXPECT_TRUE(c.healthy());
}

TEST(ServiceTls, PlaintextAndUntrustingClientsAreRefused) {
  TlsServer tls;
  auto plain = tls.client(true, false);
  expect_rpc_error([&] { plain.create(small_spec(2)); }, grpc::StatusCode::UNAVAILABLE, "");
  auto untrusting = tls.client(false, false);
  expect_rpc_error([&] { untrusting.create(small_spec(2)); }, grpc::StatusCode::UNAVAILABLE, "");
}

// A key that is not the certificate's is said so before the server tries to listen (gRPC would
// only fail to bind, and the server used to blame the address).
TEST(ServiceTls, AKeyThatIsNotTheCertificatesIsNamed) {
  TempDir dir;
  for (const char* sub : {"a", "b"}) {
    const std::string cmd = std::string("bash ") + DCALIGN_DEV_CERT_SCRIPT + " " +
                            (dir.path / sub).string() + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  auto o = test_options(dir.path / "data");
  o.insecure_localhost = false;
  o.tls_cert_file = (dir.path / "a" / "server.crt").string();
  o.tls_key_file = (dir.path / "b" / "server.key").string();
  Server s(o);
  try {
    s.start();
    ADD_FAILURE() << "the server started with another certificate's key";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("does not belong to the certificate"), std::string::npos)
        << e.what();
  }
  o.tls_key_file = (dir.path / "a" / "server.crt").string();  // a certificate, not a key
  o.data_dir = (dir.path / "data2").string();
  Server t(o);
  EXPECT_THROW(t.start(), InvalidInput);
}

}  // namespace
}  // namespace dcalign::service::testing
