#include "tests/support/reference_math.h"

#include <algorithm>
#include <cmath>

namespace kiln::testing {

Mat referenceLinear(const Mat &x, int64_t in, int64_t out, const float *weight, const float *bias,
                    const LoraFactors &lora) {
  const int64_t rows = static_cast<int64_t>(x.size()) / in;
  Mat y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        acc += x[r * in + i] * weight[o * in + i];
      y[r * out + o] = acc;
    }
  if (!lora.a)
    return y;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> low(lora.rank, 0.0);
    for (int64_t k = 0; k < lora.rank; ++k)
      for (int64_t i = 0; i < in; ++i)
        low[k] += x[r * in + i] * lora.a[k * in + i];
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < lora.rank; ++k)
        acc += low[k] * lora.b[o * lora.rank + k];
      y[r * out + o] += lora.scale * acc;
    }
  }
  return y;
}

Mat referenceRmsNorm(const Mat &x, int64_t width, const float *weight, double eps) {
  Mat y(x.size());
  for (size_t r = 0; r < x.size() / width; ++r) {
    double ms = 0;
    for (int64_t h = 0; h < width; ++h)
      ms += x[r * width + h] * x[r * width + h];
    const double inv = 1.0 / std::sqrt(ms / width + eps);
    for (int64_t h = 0; h < width; ++h)
      y[r * width + h] = x[r * width + h] * inv * weight[h];
  }
  return y;
}

double shiftedCrossEntropy(const Mat &logits, const Tensor &ids, int64_t vocab) {
  const int64_t B = ids.shape()[0], S = ids.shape()[1];
  double loss = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s + 1 < S; ++s) {
      const double *row = &logits[(b * S + s) * vocab];
      double mx = *std::max_element(row, row + vocab), sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp(row[v] - mx);
      loss += mx + std::log(sum) - row[ids.getInt(b * S + s + 1)];
    }
  return loss / static_cast<double>(B * (S - 1));
}

void causalAttentionRow(const double *q, const std::function<const double *(int64_t)> &key,
                        const std::function<const double *(int64_t)> &value, int64_t i, int64_t hd,
                        double scale, double *out) {
  std::vector<double> p(i + 1);
  for (int64_t j = 0; j <= i; ++j) {
    const double *k = key(j);
    double dot = 0;
    for (int64_t d = 0; d < hd; ++d)
      dot += q[d] * k[d];
    p[j] = dot * scale;
  }
  double mx = *std::max_element(p.begin(), p.end()), sum = 0;
  for (double &e : p)
    sum += (e = std::exp(e - mx));
  for (int64_t j = 0; j <= i; ++j) {
    const double *v = value(j);
    for (int64_t d = 0; d < hd; ++d)
      out[d] += p[j] / sum * v[d];
  }
}

ops::TensorMap modelFeed(const Graph &graph, const std::map<std::string, Tensor> &weights,
                         const Tensor &ids) {
  ops::TensorMap feed{{"input_ids", ids}, {"labels", ids}};
  for (const GraphInput &in : graph.inputs())
    if (isWeight(in.role))
      feed[in.name] = weights.at(in.name).castTo(graph.type(in.value).dtype);
  return feed;
}

double centralDifference(const std::function<double()> &loss, Tensor &weight, int64_t index) {
  const float x = weight.getFloat(index);
  const double h = 1.0 / 1024;
  weight.setFloat(index, static_cast<float>(x + h), OverflowMode::InfNan);
  const double up = loss();
  weight.setFloat(index, static_cast<float>(x - h), OverflowMode::InfNan);
  const double down = loss();
  weight.setFloat(index, x, OverflowMode::InfNan);
  return (up - down) / (2 * h);
}

} // namespace kiln::testing
