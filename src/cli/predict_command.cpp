// `dcalign predict`: a user applies the analyst's model h to its own new data (paper 001, eq. 9):
//   dcalign predict --model DIR --basis F.npy --change-of-basis G.npy --data Y.npy --out P.npy
// computes h(Y F G) with F (m x l) the user's secret basis, G (l x l) its change of basis from
// the analyst and Y (n x m) its data, one sample per row, in the units X was released in: the
// user layer releases X F without centring (User::release_data), so Y is not centred either, and
// whatever preprocessing the user applied to X before releasing it must be applied to Y. The
// model (Model::save, the learning layer's directory) is trained on the aligned X F G as it is;
// analyst-side steps outside the model (an experiment's standardize_aligned) are not applied.
// Writes an (n, 1) array of class indices or regression values, or with --proba the (n, K)
// class probabilities. Lives in dcalign-experiment, which links the learning layer.
#include <cmath>
#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/user.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::cli {
namespace {

struct PredictArgs {
  std::string model, basis, change_of_basis, data, out;
  bool proba = false;
};

std::string shape_of(const NpyHeader& h) {
  std::string s;
  for (index_t v : h.shape) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return "(" + s + (h.shape.size() == 1 ? ",)" : ")");
}

// The header of a 2-D input (`what` describes the array expected).
NpyHeader matrix_header(const std::string& opt, const std::string& path, const std::string& what) {
  const NpyHeader h = read_npy_header(path);
  if (h.shape.size() != 2)
    throw InvalidInput(opt + " '" + path + "' has shape " + shape_of(h) + "; expected " + what);
  return h;
}

Matrix<double> read_finite(const std::string& opt, const std::string& path) {
  Matrix<double> m = read_npy_matrix<double>(path);
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i)
      if (!std::isfinite(m(i, j)))
        throw InvalidInput(opt + " '" + path + "' has a non-finite value at row " +
                           std::to_string(i) + ", column " + std::to_string(j) +
                           "; expected finite values");
  return m;
}

void run(const PredictArgs& a) {
  // As for enroll: the output is renamed into place only once the whole run has succeeded, and
  // it may not replace an input.
  io::StagedOutputs outputs;
  outputs.protect(a.model, "--model", true);
  outputs.protect(a.basis, "--basis");
  outputs.protect(a.change_of_basis, "--change-of-basis");
  outputs.protect(a.data, "--data");
  const std::string out_tmp = outputs.stage(a.out, "--out");

  // Every shape is checked, from the headers and model.json, before any data is read.
  const NpyHeader hf = matrix_header("--basis", a.basis, "(m, l), the secret basis F");
  const index_t m = hf.shape[0], l = hf.shape[1];
  const std::string basis = "--basis '" + a.basis + "' " + shape_of(hf);
  // G is (l, l), or (l, dim) where the users have different l (dcalign align-ragged).
  const NpyHeader hg = matrix_header("--change-of-basis", a.change_of_basis, "(l, dim)");
  if (hg.shape[0] != l)
    throw InvalidInput("--change-of-basis '" + a.change_of_basis + "' has shape " + shape_of(hg) +
                       "; expected (l, dim) = (" + std::to_string(l) + ", dim), l the columns of " +
                       basis);
  const index_t dim = hg.shape[1];
  const NpyHeader hy = matrix_header("--data", a.data, "(n, m), one sample per row");
  if (hy.shape[1] != m)
    throw InvalidInput("--data '" + a.data + "' has shape " + shape_of(hy) + "; expected (n, " +
                       std::to_string(m) + "), m = " + std::to_string(m) + " the rows of " + basis);
  const std::unique_ptr<learn::Model> model = learn::load_model(a.model);
  if (model->num_features() != dim)
    throw InvalidInput("--model '" + a.model + "' was trained on " +
                       std::to_string(model->num_features()) +
                       " features; expected dim = " + std::to_string(dim) +
                       ", the columns of --change-of-basis '" + a.change_of_basis + "' " +
                       shape_of(hg) + " (a model of this collaboration's dimension)");
  if (a.proba && model->num_classes() == 0)
    throw UsageError("--proba asks for class probabilities, but --model '" + a.model +
                     "' is a regression model");

  const Matrix<double> F = read_finite("--basis", a.basis);
  const Matrix<double> G = read_finite("--change-of-basis", a.change_of_basis);
  const Matrix<double> Y = read_finite("--data", a.data);
  const Matrix<double> Z = map_to_collaboration(Y, F, G);
  if (a.proba) {
    write_npy<double>(out_tmp, model->predict_proba(Z).view());
  } else {
    const std::vector<double> p = model->predict(Z);
    write_npy<double>(out_tmp, Matrix<double>(Z.rows(), 1, p).view());
  }
  outputs.commit();
  std::cerr << "dcalign: " << Z.rows() << " prediction(s) of the " << model->name() << " model ("
            << (model->num_classes() == 0 ? std::string("regression")
                                          : std::to_string(model->num_classes()) + " classes")
            << ") in " << a.out << "\n";
}

}  // namespace

void add_predict_command(CLI::App& app) {
  static PredictArgs args;
  auto* cmd = app.add_subcommand("predict", kPredictDescription);
  add_path(cmd, "--model", args.model, "model directory written by Model::save")->required();
  add_path(cmd, "--basis", args.basis, "NPY array F (m, l): your secret basis")->required();
  add_path(cmd, "--change-of-basis", args.change_of_basis,
           "NPY array G (l, l): your change of basis, from the analyst")
      ->required();
  add_path(cmd, "--data", args.data, "NPY array Y (n, m): your new data, one sample per row")
      ->required();
  add_path(cmd, "--out", args.out,
           "output NPY: (n, 1) class indices or regression values, or (n, K) with --proba")
      ->required();
  cmd->add_flag("--proba", args.proba, "write the class probabilities (classifiers only)");
  cmd->callback([] { run(args); });
}

}  // namespace dcalign::cli
