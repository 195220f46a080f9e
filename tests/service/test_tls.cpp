// TLS: the server takes a certificate and key; a client that trusts it talks to it; a plaintext
// client, or one that does not trust the certificate, is refused.
#include <gtest/gtest.h>

#include <httplib.h>

#include <cstdlib>

#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

struct TlsServer {
  TempDir dir;
  std::unique_ptr<LiveServer> server;
  explicit TlsServer(const std::string& metrics_listen = "") {
    const std::string cmd = std::string("bash ") + DCALIGN_DEV_CERT_SCRIPT + " " +
                            (dir.path / "cert").string() + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("scripts/dev-cert.sh failed");
    auto o = test_options(dir.path / "data");
    o.insecure_localhost = false;
    o.tls_cert_file = (dir.path / "cert" / "server.crt").string();
    o.tls_key_file = (dir.path / "cert" / "server.key").string();
    o.metrics_listen = metrics_listen;
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

// The metrics endpoint on an address other than 127.0.0.1, localhost or [::1] speaks HTTPS with
// the server's certificate only. 127.0.0.2 is such an address, and still loopback (the tests
// use loopback only); the development certificate names localhost, which the client maps there.
TEST(ServiceTls, MetricsAwayFromTheLoopbackNamesAreServedOverTlsOnly) {
  TlsServer tls("127.0.0.2:0");
  const int port = tls.server->server->metrics_port();
  ASSERT_GT(port, 0);
  httplib::SSLClient trusting("localhost", port);
  trusting.set_hostname_addr_map({{"localhost", "127.0.0.2"}});
  trusting.set_ca_cert_path((tls.dir.path / "cert" / "server.crt").c_str());
  trusting.enable_server_certificate_verification(true);
  const auto ok = trusting.Get("/metrics");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(ok->body.find("dcalign_upload_bytes_total 0"), std::string::npos);
  // Plain HTTP gets no answer; a client that does not trust the certificate refuses it.
  httplib::Client plain("127.0.0.2", port);
  plain.set_connection_timeout(5);
  plain.set_read_timeout(5);
  const auto refused = plain.Get("/metrics");
  EXPECT_TRUE(!refused || refused->status != 200);
  httplib::SSLClient untrusting("localhost", port);
  untrusting.set_hostname_addr_map({{"localhost", "127.0.0.2"}});
  untrusting.enable_server_certificate_verification(true);
  untrusting.set_ca_cert_path((tls.dir.path / "a-file-that-is-not-there.pem").c_str());
  EXPECT_FALSE(untrusting.Get("/metrics"));
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
