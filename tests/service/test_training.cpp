// A collaboration that trains h: the participants upload X~_i and labels besides A_i, the job
// fits h on the stacked X~_i G_i, and every participant fetches the same h with its own G_i.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "dcalign/align.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/npy.hpp"
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

v1::CollaborationSpec model_spec(const std::string& kind = "logreg", std::uint32_t classes = 2) {
  auto s = small_spec(3, 40, 4);
  s.set_model(kind);
  s.set_num_classes(classes);
  return s;
}

// Every place below `dir` where a row of one of `secret` shows up: as a row or a column of a
// NumPy array of any dtype (to float32's rounding), or as the raw float64 or float32 bytes of
// the row in any file. The search, not the model's type, decides what a participant received.
std::vector<std::string> rows_found(const fs::path& dir,
                                    const std::vector<Matrix<double>>& secret) {
  std::vector<std::string> hits;
  const auto close = [](double a, double b) {
    return std::abs(a - b) <= 1e-5 * std::max(1.0, std::abs(b));
  };
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    for (std::size_t j = 0; j < secret.size(); ++j) {
      const Matrix<double>& S = secret[j];
      for (index_t r = 0; r < S.rows(); ++r) {
        std::string row64, row32;
        for (index_t c = 0; c < S.cols(); ++c) {
          const double d = S(r, c);
          const float f = static_cast<float>(d);
          row64.append(reinterpret_cast<const char*>(&d), sizeof d);
          row32.append(reinterpret_cast<const char*>(&f), sizeof f);
        }
        if (bytes.find(row64) != std::string::npos || bytes.find(row32) != std::string::npos)
          hits.push_back(e.path().string() + ": raw bytes of row " + std::to_string(r) +
                         " of participant " + std::to_string(j));
      }
      if (e.path().extension() != ".npy" || read_npy_header(e.path().string()).shape.size() != 2)
        continue;
      const Matrix<double> M = read_npy_matrix<double>(e.path().string());
      for (int transposed = 0; transposed < 2; ++transposed) {
        const index_t n = transposed ? M.cols() : M.rows(),
                      width = transposed ? M.rows() : M.cols();
        if (width != S.cols()) continue;
        for (index_t k = 0; k < n; ++k)
          for (index_t r = 0; r < S.rows(); ++r) {
            bool same = true;
            for (index_t c = 0; c < S.cols() && same; ++c)
              same = close(transposed ? M(c, k) : M(k, c), S(r, c));
            if (same)
              hits.push_back(e.path().string() + ": entry " + std::to_string(k) + " is row " +
                             std::to_string(r) + " of participant " + std::to_string(j));
          }
      }
    }
  }
  return hits;
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
  const auto r = analyst.create(model_spec("logreg"));
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
  auto here = learn::make_model("logreg", mo);
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
  const auto r = analyst.create(model_spec());
  auto p0 = client_for(server.port(), r.tokens(0).token());
  Matrix<double> y(10, 1);
  y(3, 0) = 2.5;
  expect_rpc_error([&] { p0.upload(r.collaboration_id(), v1::PART_LABELS, y); },
                   StatusCode::INVALID_ARGUMENT, "label 2.500000 at row 3 is not a class index");
  y(3, 0) = 2;
  expect_rpc_error([&] { p0.upload(r.collaboration_id(), v1::PART_LABELS, y); },
                   StatusCode::INVALID_ARGUMENT, "from 0 to 1");
  auto s = model_spec();
  s.set_model("pca");
  expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT, "is not a model");
  s.set_model("linear");
  expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT,
                   "does not do classification");
  s.set_model("logreg");
  s.set_num_classes(1);
  expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT,
                   "spec.num_classes 1 is out of range");
}

// Data and labels of different lengths are refused at the upload, to the participant they
// belong to, in either order (at the job the message would name the participant to the others).
TEST(ServiceTraining, DataAndLabelsOfDifferentLengthsAreRefusedAtTheUpload) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto r = analyst.create(model_spec());
  const std::string& id = r.collaboration_id();
  auto a = client_for(server.port(), r.tokens(0).token());
  a.upload(id, v1::PART_DATA, random_matrix(20, 4, 50));
  expect_rpc_error([&] { a.upload(id, v1::PART_LABELS, labels_of(random_matrix(21, 4, 1))); },
                   StatusCode::INVALID_ARGUMENT,
                   "this upload of the labels has 21 rows, but your data has 20");
  auto b = client_for(server.port(), r.tokens(1).token());
  b.upload(id, v1::PART_LABELS, labels_of(random_matrix(21, 4, 1)));
  expect_rpc_error([&] { b.upload(id, v1::PART_DATA, random_matrix(20, 4, 50)); },
                   StatusCode::INVALID_ARGUMENT,
                   "this upload of the data has 20 rows, but your labels has 21");
  // The refused part is gone; the right one is taken.
  a.upload(id, v1::PART_LABELS, labels_of(random_matrix(20, 4, 1)));
  EXPECT_TRUE(a.upload_offset(id, v1::PART_LABELS).complete());
}

// Privacy: what a participant fetches holds no row of another participant's aligned data
// X~_j G_j, for every model kind. A kind whose saved state keeps training rows is refused when
// the collaboration is created, with the reason; the others run, and the fetched files are
// searched for the rows.
TEST(ServiceTraining, NoParticipantReceivesAnotherParticipantsRows) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  std::vector<Matrix<double>> A, X, y;
  for (int i = 0; i < 3; ++i) {
    A.push_back(random_matrix(40, 4, 700 + i));
    X.push_back(random_matrix(25 + 3 * i, 4, 800 + i));
    y.push_back(labels_of(X.back()));
  }
  AlignOptions opts;
  opts.seed = 5;
  const auto aligned = align(Stack<double>::from_matrices(A), opts);
  // Participant 0's view: the aligned rows of participants 1 and 2, and (the search's control)
  // its own, which a model holding rows would also hold.
  std::vector<Matrix<double>> others, own;
  for (int i = 1; i < 3; ++i) others.push_back(apply_change_of_basis(X[i], aligned.G.matrix(i)));
  own.push_back(apply_change_of_basis(X[0], aligned.G.matrix(0)));

  int ran = 0, refused = 0;
  for (const std::string& kind : learn::model_names()) {
    const std::uint32_t classes = learn::make_model(kind)->can_fit(2) ? 2 : 0;
    auto spec = model_spec(kind, classes);
    if (!learn::model_training_data(kind).empty()) {
      expect_rpc_error([&] { analyst.create(spec); }, StatusCode::INVALID_ARGUMENT,
                       "spec.model '" + kind + "' is refused");
      ++refused;
      continue;
    }
    const auto r = analyst.create(spec);
    for (int i = 0; i < 3; ++i) {
      auto p = client_for(server.port(), r.tokens(i).token());
      p.upload(r.collaboration_id(), v1::PART_ANCHOR, A[i]);
      p.upload(r.collaboration_id(), v1::PART_DATA, X[i]);
      Matrix<double> labels = y[i];
      if (classes == 0)
        for (index_t k = 0; k < labels.rows(); ++k) labels(k, 0) = X[i](k, 1);
      p.upload(r.collaboration_id(), v1::PART_LABELS, labels);
    }
    ASSERT_EQ(wait_for_job(analyst, r.collaboration_id()), "done")
        << kind << ": " << analyst.status(r.collaboration_id()).job_error();
    const fs::path out = dir.path / ("fetched_" + kind);
    client_for(server.port(), r.tokens(0).token()).fetch(r.collaboration_id(), out.string());
    ASSERT_TRUE(fs::exists(out / "model" / "model.json")) << kind;
    EXPECT_EQ(rows_found(out, others), std::vector<std::string>{}) << kind;
    ++ran;
  }
  EXPECT_GE(ran, 3);      // mlp, logreg, linear
  EXPECT_GE(refused, 3);  // svm, knn, forest

  // The search finds rows where a model keeps them: a k-NN model saved on participant 0's
  // aligned rows, and an SVM's support vectors.
  std::vector<double> labels(y[0].data(), y[0].data() + y[0].rows());
  for (const char* kind : {"knn", "svm"}) {
    auto m = learn::make_model(kind);
    m->fit(own[0], labels, 2);
    const fs::path saved = dir.path / (std::string("control_") + kind);
    m->save(saved.string());
    EXPECT_FALSE(rows_found(saved, own).empty()) << kind << ": the search found no row";
  }
}

}  // namespace
}  // namespace dcalign::service::testing
