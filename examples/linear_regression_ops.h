// The user-defined operators of the linear_regression example, and the
// deterministic data they generate. Linking this library registers them.
//
// SyntheticLinearData() -> x, y, true_W, true_b
//   args: seed (int), num_samples (int >= 1), num_features (int >= 1),
//         noise (float >= 0), num_shards (int >= 1, dividing num_samples;
//         default 1), shard (int in [0, num_shards); default 0)
//   x float [n, d] uniform in [-1, 1); true_W float [d] uniform in [-2, 2);
//   true_b float [] uniform in [-1, 1); y float [n] = x.true_W + true_b +
//   noise * N(0, 1)-ish (Irwin-Hall: sum of 12 uniforms - 6). Every value
//   comes from SplitMix64 with integer arithmetic and IEEE double operations
//   only (no <random> distributions, no libm), so the data is the same on
//   every platform and run. x and y hold only rows [shard * n / num_shards,
//   (shard + 1) * n / num_shards) of the set (all of it by default).
//
// LinearRegressionSGDStep(W, b, x, y, sse, count, done) -> W, b, sse, count
//   args: lr (float > 0)
//   One minibatch step of SGD on the mean squared error: with m = rows of x,
//   err_i = x_i.W + b - y_i, sse += sum err_i^2 and count += m (the loss the
//   batch saw before the update), then W -= lr * 2/m * sum err_i x_i and
//   b -= lr * 2/m * sum err_i. Sums are in double, in row order, so the
//   result is bit-for-bit reproducible. When `done` (a bool scalar) is true
//   the op changes nothing: an epoch run after training ended (a resume from
//   the final epoch) leaves the model as it was. W, b, sse, count are
//   updated in place (outputs must name the same blobs as inputs 0, 1, 4, 5).
//   Not for concurrent use on the same blobs (the example runs one thread).
//
// LinearRegressionGradient(W, b, x, y, done) -> g
//   g double [d + 3] = [sum err_i x_i (d values), sum err_i, sum err_i^2, m]
//   over the m rows of x (zeros when `done`), in row order: what
//   LinearRegressionSGDStep computes, as one tensor that Allreduce can sum
//   over data-parallel nodes.
//
// LinearRegressionApply(W, b, g, sse, count) -> W, b, sse, count
//   args: lr (float > 0)
//   Applies a (summed) g: with M = g[d + 2] rows, W -= lr * 2/M * g[0:d],
//   b -= lr * 2/M * g[d], sse += g[d + 1], count += M; nothing when M = 0.
//   In place like LinearRegressionSGDStep, and bit-identical to it for one
//   node.
//
// FinishLinearRegressionEpoch(sse, count, epoch_count, done, last_loss)
//     -> epoch_count, done, last_loss, stop
//   args: max_epochs (int, 0 = no limit), loss_threshold (float, 0 = none)
//   If `done` is already true: stop := true, nothing else changes.
//   Otherwise epoch_count += 1, last_loss := sse / count, done := epoch_count
//   >= max_epochs or last_loss <= loss_threshold, stop := done. The first
//   three outputs are updated in place.

#ifndef JOBGRAPH_EXAMPLES_LINEAR_REGRESSION_OPS_H_
#define JOBGRAPH_EXAMPLES_LINEAR_REGRESSION_OPS_H_

#include <cstdint>
#include <vector>

namespace jobgraph {
namespace examples {

// SplitMix64 (Steele, Lea and Flood): a tiny, well-mixed 64-bit generator
// whose output is fully specified, unlike the std:: distributions.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

struct LinearData {
  std::vector<float> x;  // num_samples * num_features, row-major
  std::vector<float> y;  // num_samples
  std::vector<float> true_w;
  float true_b = 0;
};

// The data SyntheticLinearData produces.
LinearData GenerateLinearData(uint64_t seed, int64_t num_samples,
                              int64_t num_features, double noise);

}  // namespace examples
}  // namespace jobgraph

#endif  // JOBGRAPH_EXAMPLES_LINEAR_REGRESSION_OPS_H_
