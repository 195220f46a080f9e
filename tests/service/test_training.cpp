// A collaboration that trains h: the participants upload X~_i and labels besides A_i, the job
// fits h on the stacked X~_i G_i, and every participant fetches the same h with its own G_i.
#include <gtest/gtest.h>

#include "dcalign/align.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/user.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

std::string wait_for_job(Client& c, const std::string& id) {
  for (int i = 0; i < 1500; ++i) {
    const auto st = c.status(id).job_state();
    if (st != "queued" && st != "running") return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "timeout";
}

v1::CollaborationSpec knn_spec() {
  auto s = small_spec(3, 40, 4);
  s.set_model("knn");
  s.set_num_classes(2);
  return s;
}

Matrix<double> labels_of(const Matrix<double>& X) {
  Matrix<double> y(X.rows(), 1);
  for (index_t r = 0; r < X.rows(); ++r) y(r, 0) = X(r, 0) > 0 ? 1.0 : 0.0;
  return y;
}

TEST(ServiceTraining, EveryParticipantGetsTheModelTrainedOnTheAlignedData) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto r = analyst.create(knn_spec());
  const std::string id = r.collaboration_id();
  std::vector<Matrix<double>> A, X, y;
  for (int i = 0; i < 3; ++i) {
    A.push_back(random_matrix(40, 4, 300 + i));
    X.push_back(random_matrix(30 + 5 * i, 4, 400 + i));
    y.push_back(labels_of(X.back()));
    auto p = client_for(server.port(), r.tokens(i).token());
    p.upload(id, v1::PART_ANCHOR, A.back());
    p.upload(id, v1::PART_DATA, X.back());
    p.upload(id, v1::PART_LABELS, y.back());
  }
  ASSERT_EQ(wait_for_job(analyst, id), "done") << analyst.status(id).job_error();
  const std::string report = analyst.status(id).job_report();
  EXPECT_NE(report.find("\"training_accuracy\""), std::string::npos) << report;
  EXPECT_NE(report.find("\"samples\": 105"), std::string::npos) << report;

  // The same h, trained here on the same stacked X~_i G_i.
  AlignOptions opts;
  opts.seed = 5;
  const auto aligned = align(Stack<double>::from_matrices(A), opts);
  Matrix<double> all(105, 4);
  std::vector<double> labels;
  index_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const Matrix<double> XG = apply_change_of_basis(X[i], aligned.G.matrix(i));
    for (index_t c = 0; c < 4; ++c)
      for (index_t row = 0; row < XG.rows(); ++row) all(at + row, c) = XG(row, c);
    at += XG.rows();
    labels.insert(labels.end(), y[i].data(), y[i].data() + y[i].rows());
  }
  learn::ModelOptions mo;
  mo.seed = 5;
  auto here = learn::make_model("knn", mo);
  here->fit(all, labels, 2);
  const Matrix<double> probe = random_matrix(50, 4, 999);
  for (int i = 0; i < 3; ++i) {
    const fs::path out = dir.path / ("r" + std::to_string(i));
    client_for(server.port(), r.tokens(i).token()).fetch(id, out.string());
    ASSERT_TRUE(fs::exists(out / "model" / "model.json"));
    const auto h = learn::load_model((out / "model").string());
    EXPECT_EQ(h->predict(probe), here->predict(probe)) << "participant " << i;
  }
}

TEST(ServiceTraining, LabelsAndSpecsAreChecked) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto r = analyst.create(knn_spec());
  auto p0 = client_for(server.port(), r.tokens(0).token());
  Matrix<double> y(10, 1);
  y(3, 0) = 2.5;
  expect_rpc_error([&] { p0.upload(r.collaboration_id(), v1::PART_LABELS, y); },
                   StatusCode::INVALID_ARGUMENT, "label 2.500000 at row 3 is not a class index");
  y(3, 0) = 2;
  expect_rpc_error([&] { p0.upload(r.collaboration_id(), v1::PART_LABELS, y); },
                   StatusCode::INVALID_ARGUMENT, "from 0 to 1");
  auto s = knn_spec();
  s.set_model("pca");
  expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT, "is not a model");
  s.set_model("linear");
  expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT,
                   "does not do classification");
  s.set_model("knn");
  s.set_num_classes(1);
  expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT,
                   "spec.num_classes 1 is out of range");
}

TEST(ServiceTraining, DataAndLabelsOfDifferentLengthsFailTheJobNamingTheParticipant) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  auto spec = knn_spec();
  spec.clear_participants();
  spec.add_participants("a");
  spec.add_participants("b");
  const auto r = analyst.create(spec);
  for (int i = 0; i < 2; ++i) {
    auto p = client_for(server.port(), r.tokens(i).token());
    const Matrix<double> X = random_matrix(20, 4, 50 + i);
    p.upload(r.collaboration_id(), v1::PART_ANCHOR, random_matrix(40, 4, 60 + i));
    p.upload(r.collaboration_id(), v1::PART_DATA, X);
    p.upload(r.collaboration_id(), v1::PART_LABELS, labels_of(random_matrix(20 + i, 4, 1)));
  }
  ASSERT_EQ(wait_for_job(analyst, r.collaboration_id()), "failed");
  EXPECT_NE(analyst.status(r.collaboration_id())
                .job_error()
                .find("participant b uploaded 20 rows of data but 21 labels"),
            std::string::npos)
      << analyst.status(r.collaboration_id()).job_error();
}

}  // namespace
}  // namespace dcalign::service::testing
