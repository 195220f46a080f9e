// dcalign::torch_api (include/dcalign/torch.hpp): results equal dcalign::align on the same
// anchors, in place for the column-major layout and through one copy otherwise; G's layout;
// transform; every error case.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/torch.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::make_synthetic;
using testing::released_anchors;

constexpr index_t kC = 4, kA = 30, kM = 9, kL = 5;

template <typename T>
at::ScalarType dtype_of() {
  return std::is_same_v<T, float> ? at::kFloat : at::kDouble;
}

// A view of a dcalign stack as a [c, a, l] tensor with dcalign's column-major layout.
template <typename T>
at::Tensor view_of(Stack<T>& s) {
  return at::from_blob(s.data(), {s.count(), s.rows(), s.cols()},
                       {s.rows() * s.cols(), 1, s.rows()},
                       at::TensorOptions().dtype(dtype_of<T>()));
}

template <typename T>
Stack<T> anchors_for_test(std::uint64_t seed = 3) {
  return released_anchors<T>(make_synthetic(kA, kM, kL, kC, SpanCondition::diff_span, seed));
}

bool has_phase(const AlignReport& r, const std::string& name) {
  for (const auto& [n, s] : r.seconds)
    if (n == name) return true;
  return false;
}

// G from the tensor API equals G from dcalign::align entry by entry, bit for bit.
template <typename T>
void expect_identical(const at::Tensor& G, const Stack<T>& ref) {
  ASSERT_EQ(G.dim(), 3);
  ASSERT_EQ(G.size(0), ref.count());
  ASSERT_EQ(G.size(1), ref.rows());
  ASSERT_EQ(G.size(2), ref.cols());
  const auto acc = G.accessor<T, 3>();
  for (index_t k = 0; k < ref.count(); ++k)
    for (index_t i = 0; i < ref.rows(); ++i)
      for (index_t j = 0; j < ref.cols(); ++j)
        ASSERT_EQ(acc[k][i][j], ref(k, i, j)) << "G[" << k << "](" << i << ", " << j << ")";
}

template <typename T>
class TorchApi : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TorchApi, Precisions);

TYPED_TEST(TorchApi, ColumnMajorInputIsReadInPlaceAndMatchesAlignBitForBit) {
  using T = TypeParam;
  for (Method method : {Method::odc, Method::imakura, Method::kawakami, Method::gopp}) {
    SCOPED_TRACE(to_string(method));
    auto stack = anchors_for_test<T>();
    AlignOptions opts;
    opts.method = method;
    opts.seed = 11;
    const auto ref = align(stack, opts);
    const at::Tensor A = view_of(stack);
    ASSERT_TRUE(torch_api::takes_without_copy(A));
    auto [G, report] = torch_api::align(A, opts);
    // No copy: the report names no copy phase and the result is bit-identical to aligning
    // the very same memory through dcalign::align.
    EXPECT_FALSE(has_phase(report, "copy_anchors"));
    EXPECT_EQ(report.method, ref.report.method);
    EXPECT_EQ(report.precision, ref.report.precision);
    EXPECT_EQ(report.objective, ref.report.objective);
    expect_identical<T>(G, ref.G);
    // G is column-major per matrix, like dcalign's stacks.
    EXPECT_EQ(G.stride(0), kL * kL);
    EXPECT_EQ(G.stride(1), 1);
    EXPECT_EQ(G.stride(2), kL);
    EXPECT_EQ(G.scalar_type(), dtype_of<T>());
    EXPECT_TRUE(G.device().is_cpu());
  }
}

TYPED_TEST(TorchApi, TransposedContiguousIdiomIsTakenWithoutCopy) {
  using T = TypeParam;
  auto stack = anchors_for_test<T>();
  // The header's idiom for turning a row-major tensor into dcalign's layout.
  const at::Tensor rowmajor = view_of(stack).contiguous();
  const at::Tensor A = rowmajor.transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_TRUE(torch_api::takes_without_copy(A));
  const auto [G, report] = torch_api::align(A);
  EXPECT_FALSE(has_phase(report, "copy_anchors"));
  expect_identical<T>(G, align(stack, AlignOptions{}).G);
}

TYPED_TEST(TorchApi, RowMajorAndStridedInputsAreCopiedOnceAndGiveTheSameResult) {
  using T = TypeParam;
  auto stack = anchors_for_test<T>();
  const auto ref = align(stack, AlignOptions{});
  const at::Tensor rowmajor = view_of(stack).contiguous();  // C-contiguous [c, a, l]
  ASSERT_TRUE(rowmajor.is_contiguous());
  EXPECT_FALSE(torch_api::takes_without_copy(rowmajor));
  const at::Tensor before = rowmajor.clone();
  const auto [G, report] = torch_api::align(rowmajor);
  EXPECT_TRUE(has_phase(report, "copy_anchors"));
  // The copy reproduces dcalign's layout exactly, so the numbers are the same bits.
  expect_identical<T>(G, ref.G);
  EXPECT_TRUE(at::equal(rowmajor, before)) << "the input must not be modified";

  // Every other user of a stack twice as large: strided along the users.
  const at::Tensor doubled = at::cat({rowmajor.unsqueeze(1), rowmajor.unsqueeze(1)}, 1)
                                 .reshape({2 * kC, kA, kL})
                                 .transpose(1, 2)
                                 .contiguous()
                                 .transpose(1, 2);
  const at::Tensor every_other = doubled.slice(0, 0, 2 * kC, 2);
  EXPECT_FALSE(torch_api::takes_without_copy(every_other));
  expect_identical<T>(torch_api::align(every_other).first, ref.G);
}

TYPED_TEST(TorchApi, AlignedAnchorsAgreeAndTransformIsTheProduct) {
  using T = TypeParam;
  // SameSpan-Orth: ODC makes every A_i G_i equal (paper 001, Theorem 5.3).
  auto stack =
      released_anchors<T>(make_synthetic(kA, kM, kL, kC, SpanCondition::same_span_orth, 5));
  const at::Tensor A = view_of(stack);
  const auto [G, report] = torch_api::align(A);
  const at::Tensor ref = torch_api::transform(A[0], G[0]);
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;  // relative, as in test_odc
  for (index_t i = 0; i < kC; ++i) {
    const at::Tensor Y = torch_api::transform(A[i], G[i]);
    EXPECT_TRUE(at::equal(Y, at::matmul(A[i], G[i])));
    EXPECT_LE((Y - ref).norm().template item<double>(), tol * ref.norm().template item<double>())
        << "user " << i;
  }
}

// ---- errors

template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidInput thrown";
  return "";
}

TEST(TorchApiErrors, WrongDtype) {
  for (auto type : {at::kInt, at::kLong, at::kHalf, at::kBool}) {
    const auto A = at::zeros({2, 6, 3}, at::TensorOptions().dtype(type));
    const std::string msg = message_of([&] { torch_api::align(A); });
    EXPECT_NE(msg.find("dtype"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected float32 or float64"), std::string::npos) << msg;
  }
}

TEST(TorchApiErrors, WrongRank) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{6, 3}, {2, 2, 6, 3}, {}}) {
    const auto A = at::ones(shape, at::kDouble);
    const std::string msg = message_of([&] { torch_api::align(A); });
    EXPECT_NE(msg.find("expected a 3-D tensor [c, a, l]"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(shape.size()) + "-D"), std::string::npos) << msg;
  }
  EXPECT_THROW(torch_api::align(at::Tensor()), InvalidInput);
}

TEST(TorchApiErrors, EmptyDimension) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{0, 6, 3}, {2, 0, 3}, {2, 6, 0}}) {
    const auto A = at::ones(shape, at::kFloat);
    const std::string msg = message_of([&] { torch_api::align(A); });
    EXPECT_NE(msg.find("empty dimension"), std::string::npos) << msg;
  }
}

TEST(TorchApiErrors, MoreColumnsThanRowsIsTheLibraryError) {
  const auto A = at::rand({2, 3, 5}, at::kDouble);
  const std::string msg = message_of([&] { torch_api::align(A); });
  EXPECT_NE(msg.find("exceeds the anchor rows"), std::string::npos) << msg;
}

// The CLI's message: user, row and column of the first non-finite entry of A_i (a x l), for
// both layouts and every method.
TEST(TorchApiErrors, NonFiniteValuesNameUserRowAndColumn) {
  auto stack = anchors_for_test<double>();
  const at::Tensor colmajor = view_of(stack).clone(at::MemoryFormat::Preserve);
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    for (bool copy : {false, true}) {
      for (Method method : {Method::odc, Method::imakura, Method::kawakami, Method::gopp}) {
        at::Tensor A = copy ? colmajor.contiguous() : colmajor.clone(at::MemoryFormat::Preserve);
        ASSERT_EQ(torch_api::takes_without_copy(A), !copy);
        A[2][7][3] = bad;
        AlignOptions opts;
        opts.method = method;
        const std::string msg = message_of([&] { torch_api::align(A, opts); });
        EXPECT_NE(msg.find("user 2: anchor representation A_2 has a non-finite value (NaN or "
                           "Inf) at row 7, column 3"),
                  std::string::npos)
            << msg;
      }
    }
  }
}

TEST(TorchApiErrors, UnsupportedDevice) {
  // A meta tensor has no data: neither backend can take it.
  const auto A = at::empty({2, 6, 3}, at::TensorOptions().dtype(at::kDouble).device(at::kMeta));
  try {
    torch_api::align(A);
    FAIL() << "no BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a CPU or CUDA tensor"), std::string::npos)
        << e.what();
  }
}

TEST(TorchApiErrors, TransformArguments) {
  const auto X = at::ones({7, 3}, at::kDouble);
  const auto G = at::eye(3, at::kDouble);
  EXPECT_TRUE(at::equal(torch_api::transform(X, G), X));
  auto expect_msg = [](const at::Tensor& x, const at::Tensor& g, const std::string& part) {
    const std::string msg = message_of([&] { torch_api::transform(x, g); });
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  };
  expect_msg(X, G.to(at::kFloat), "expected the same dtype");
  expect_msg(X.to(at::kInt), G, "expected float32 or float64");
  expect_msg(X, at::eye(4, at::kDouble), "the same l");
  expect_msg(X.reshape({21}), G, "X must be a 2-D tensor");
  expect_msg(X, at::ones({3, 2}, at::kDouble), "G must be a square");
}

}  // namespace
}  // namespace dcalign
