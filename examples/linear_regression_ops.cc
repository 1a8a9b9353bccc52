#include "examples/linear_regression_ops.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace examples {

LinearData GenerateLinearData(uint64_t seed, int64_t num_samples,
                              int64_t num_features, double noise) {
  SplitMix64 rng(seed);
  LinearData data;
  data.true_w.resize(num_features);
  for (float& w : data.true_w) w = static_cast<float>(4 * rng.Uniform() - 2);
  data.true_b = static_cast<float>(2 * rng.Uniform() - 1);
  data.x.resize(num_samples * num_features);
  data.y.resize(num_samples);
  for (int64_t i = 0; i < num_samples; ++i) {
    double target = data.true_b;
    for (int64_t j = 0; j < num_features; ++j) {
      const float x = static_cast<float>(2 * rng.Uniform() - 1);
      data.x[i * num_features + j] = x;
      target += static_cast<double>(data.true_w[j]) * x;
    }
    // Irwin-Hall: mean 0, variance 1, close enough to a normal for noise.
    double gaussian = -6;
    for (int k = 0; k < 12; ++k) gaussian += rng.Uniform();
    data.y[i] = static_cast<float>(target + noise * gaussian);
  }
  return data;
}

namespace {

class SyntheticLinearDataOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 4, 4));
    seed_ = GetArg<int64_t>("seed", 0);
    JG_ASSIGN_OR_RETURN(num_samples_,
                        GetPositiveArg<int64_t>("num_samples", 0));
    JG_ASSIGN_OR_RETURN(num_features_,
                        GetPositiveArg<int64_t>("num_features", 0));
    JG_ASSIGN_OR_RETURN(noise_, GetNonNegativeArg<double>("noise", 0.0));
    JG_ASSIGN_OR_RETURN(num_shards_, GetPositiveArg<int64_t>("num_shards", 1));
    shard_ = GetArg<int64_t>("shard", 0);
    if (shard_ < 0 || shard_ >= num_shards_ ||
        num_samples_ % num_shards_ != 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("shard ", shard_, " of ", num_shards_,
                                " must be in [0, num_shards) and divide ",
                                num_samples_, " samples evenly"));
    }
    return absl::OkStatus();
  }

  absl::Status Run() override {
    LinearData data = GenerateLinearData(static_cast<uint64_t>(seed_),
                                         num_samples_, num_features_, noise_);
    // Every shard generates the whole set, so the data never depends on
    // the number of shards, and keeps its own rows.
    const int64_t rows = num_samples_ / num_shards_;
    const int64_t first = shard_ * rows;
    std::vector<float> x(data.x.begin() + first * num_features_,
                         data.x.begin() + (first + rows) * num_features_);
    std::vector<float> y(data.y.begin() + first, data.y.begin() + first + rows);
    *Output(0) = Tensor::FromVector<float>(x, {rows, num_features_});
    *Output(1) = Tensor::FromVector<float>(y);
    *Output(2) = Tensor::FromVector<float>(data.true_w);
    *Output(3) = Tensor::Scalar<float>(data.true_b);
    return absl::OkStatus();
  }

 private:
  int64_t seed_ = 0;
  int64_t num_samples_ = 0;
  int64_t num_features_ = 0;
  double noise_ = 0;
  int64_t num_shards_ = 1;
  int64_t shard_ = 0;
};
JG_REGISTER_OPERATOR(SyntheticLinearData, SyntheticLinearDataOp);

// The batch's gradient sums, in row order: [sum err_i x_i (d values),
// sum err_i, sum err_i^2, m], for W [d], b [], x [m, d], y [m].
absl::StatusOr<std::vector<double>> BatchGradient(const OperatorBase& op,
                                                  const Tensor& w,
                                                  const Tensor& b,
                                                  const Tensor& x,
                                                  const Tensor& y) {
  const int64_t m = x.dim(0);
  const int64_t d = w.dim(0);
  if (x.dim(1) != d || y.dim(0) != m) {
    return op.Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("shapes do not match: W ", w.DebugString(0), ", x ",
                     x.DebugString(0), ", y ", y.DebugString(0)));
  }
  std::vector<double> g(d + 3, 0.0);
  const float* wv = w.data<float>();
  const float* xv = x.data<float>();
  const float* yv = y.data<float>();
  const double bias = b.scalar<float>();
  for (int64_t i = 0; i < m; ++i) {
    const float* row = xv + i * d;
    double prediction = bias;
    for (int64_t j = 0; j < d; ++j) prediction += double{wv[j]} * row[j];
    const double err = prediction - yv[i];
    g[d + 1] += err * err;
    for (int64_t j = 0; j < d; ++j) g[j] += err * row[j];
    g[d] += err;
  }
  g[d + 2] = static_cast<double>(m);
  return g;
}

// Applies gradient sums `g` (BatchGradient's layout, possibly summed over
// nodes) to the op's outputs W, b, sse, count (0 to 3), which are its
// inputs too: W -= lr * 2/M * g[0:d], b -= lr * 2/M * g[d], sse += g[d + 1],
// count += M, with M = g[d + 2] rows; nothing when M = 0.
void ApplyGradient(const double* g, int64_t d, double lr, OperatorBase& op) {
  const int64_t m = static_cast<int64_t>(g[d + 2]);
  if (m == 0) return;
  const double scale = lr * 2.0 / static_cast<double>(m);
  float* w = op.Output(0)->mutable_data<float>();
  for (int64_t j = 0; j < d; ++j) {
    w[j] = static_cast<float>(w[j] - scale * g[j]);
  }
  float* b = op.Output(1)->mutable_data<float>();
  b[0] = static_cast<float>(b[0] - scale * g[d]);
  op.Output(2)->mutable_data<double>()[0] += g[d + 1];
  op.Output(3)->mutable_data<int64_t>()[0] += m;
}

class LinearRegressionSGDStepOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(7, 7, 4, 4));
    JG_RETURN_IF_ERROR(CheckInPlace(0, 0));
    JG_RETURN_IF_ERROR(CheckInPlace(1, 1));
    JG_RETURN_IF_ERROR(CheckInPlace(2, 4));
    JG_RETURN_IF_ERROR(CheckInPlace(3, 5));
    JG_ASSIGN_OR_RETURN(lr_, GetPositiveArg<double>("lr", 0.0));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* done, Input(6, BOOL, 0));
    if (done->scalar<bool>()) return absl::OkStatus();
    JG_ASSIGN_OR_RETURN(const Tensor* w, Input(0, FLOAT, 1));
    JG_ASSIGN_OR_RETURN(const Tensor* b, Input(1, FLOAT, 0));
    JG_ASSIGN_OR_RETURN(const Tensor* x, Input(2, FLOAT, 2));
    JG_ASSIGN_OR_RETURN(const Tensor* y, Input(3, FLOAT, 1));
    JG_RETURN_IF_ERROR(Input(4, DOUBLE, 0).status());
    JG_RETURN_IF_ERROR(Input(5, INT64, 0).status());
    JG_ASSIGN_OR_RETURN(std::vector<double> g,
                        BatchGradient(*this, *w, *b, *x, *y));
    // Inputs and outputs are the same blobs: every input was read above.
    ApplyGradient(g.data(), w->dim(0), lr_, *this);
    return absl::OkStatus();
  }

 private:
  double lr_ = 0;
};
JG_REGISTER_OPERATOR(LinearRegressionSGDStep, LinearRegressionSGDStepOp);

class LinearRegressionGradientOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(5, 5, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* w, Input(0, FLOAT, 1));
    JG_ASSIGN_OR_RETURN(const Tensor* b, Input(1, FLOAT, 0));
    JG_ASSIGN_OR_RETURN(const Tensor* x, Input(2, FLOAT, 2));
    JG_ASSIGN_OR_RETURN(const Tensor* y, Input(3, FLOAT, 1));
    JG_ASSIGN_OR_RETURN(const Tensor* done, Input(4, BOOL, 0));
    JG_ASSIGN_OR_RETURN(std::vector<double> sums,
                        BatchGradient(*this, *w, *b, *x, *y));
    // [sum err x_j (d), sum err, sum err^2, rows]; zeros once done.
    if (done->scalar<bool>()) std::fill(sums.begin(), sums.end(), 0.0);
    Tensor g = Tensor::FromVector<double>(sums);
    *Output(0) = std::move(g);
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(LinearRegressionGradient, LinearRegressionGradientOp);

class LinearRegressionApplyOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(5, 5, 4, 4));
    JG_RETURN_IF_ERROR(CheckInPlace(0, 0));
    JG_RETURN_IF_ERROR(CheckInPlace(1, 1));
    JG_RETURN_IF_ERROR(CheckInPlace(2, 3));
    JG_RETURN_IF_ERROR(CheckInPlace(3, 4));
    JG_ASSIGN_OR_RETURN(lr_, GetPositiveArg<double>("lr", 0.0));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* w, Input(0, FLOAT, 1));
    JG_ASSIGN_OR_RETURN(const Tensor* b, Input(1, FLOAT, 0));
    JG_ASSIGN_OR_RETURN(const Tensor* g, Input(2, DOUBLE, 1));
    JG_RETURN_IF_ERROR(Input(3, DOUBLE, 0).status());
    JG_RETURN_IF_ERROR(Input(4, INT64, 0).status());
    const int64_t d = w->dim(0);
    if (g->dim(0) != d + 3) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("gradient ", g->DebugString(0),
                                " does not fit W ", w->DebugString(0)));
    }
    ApplyGradient(g->data<double>(), d, lr_, *this);
    return absl::OkStatus();
  }

 private:
  double lr_ = 0;
};
JG_REGISTER_OPERATOR(LinearRegressionApply, LinearRegressionApplyOp);

class FinishLinearRegressionEpochOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(5, 5, 4, 4));
    JG_RETURN_IF_ERROR(CheckInPlace(0, 2));
    JG_RETURN_IF_ERROR(CheckInPlace(1, 3));
    JG_RETURN_IF_ERROR(CheckInPlace(2, 4));
    JG_ASSIGN_OR_RETURN(max_epochs_,
                        GetNonNegativeArg<int64_t>("max_epochs", 0));
    JG_ASSIGN_OR_RETURN(loss_threshold_,
                        GetNonNegativeArg<double>("loss_threshold", 0.0));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* sse, Input(0, DOUBLE, 0));
    JG_ASSIGN_OR_RETURN(const Tensor* count, Input(1, INT64, 0));
    JG_ASSIGN_OR_RETURN(const Tensor* epochs, Input(2, INT64, 0));
    JG_ASSIGN_OR_RETURN(const Tensor* done, Input(3, BOOL, 0));
    JG_RETURN_IF_ERROR(Input(4, DOUBLE, 0).status());
    bool stop = done->scalar<bool>();
    if (!stop) {
      const int64_t epoch_count = epochs->scalar<int64_t>() + 1;
      const int64_t n = count->scalar<int64_t>();
      const double loss = n > 0 ? sse->scalar<double>() / n
                                : std::numeric_limits<double>::quiet_NaN();
      stop = (max_epochs_ > 0 && epoch_count >= max_epochs_) ||
             (loss_threshold_ > 0 && loss <= loss_threshold_);
      Output(0)->mutable_data<int64_t>()[0] = epoch_count;
      Output(1)->mutable_data<bool>()[0] = stop;
      Output(2)->mutable_data<double>()[0] = loss;
    }
    *Output(3) = Tensor::Scalar<bool>(stop);
    return absl::OkStatus();
  }

 private:
  int64_t max_epochs_ = 0;
  double loss_threshold_ = 0;
};
JG_REGISTER_OPERATOR(FinishLinearRegressionEpoch,
                     FinishLinearRegressionEpochOp);

}  // namespace
}  // namespace examples
}  // namespace jobgraph
