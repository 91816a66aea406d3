// The single-position decoder step of src/transformer_lab/nn/decoder_step.py (float32 path),
// written in C++ against ATen: the same operators on the same tensors, without the Python
// interpreter between them. Built and timed by bench_aten_step.py; not part of the package
// (measured, not kept: docs/results.md#ctranslate2).
//
// Shape legend: B batch rows, E d_model, H heads, Dh head size, t cached target positions
// (the new one included), S memory length, C a self-attention buffer's capacity.

#include <torch/extension.h>

#include <cmath>
#include <vector>

using at::Tensor;

namespace {

// The parameters of one layer in `parameters`, in this order (products take [in, out] views).
enum Parameter : int64_t {
  kSelfQkvWeightT, kSelfQkvBias, kSelfOutWeightT, kSelfOutBias,
  kCrossQueryWeightT, kCrossQueryBias, kCrossOutWeightT, kCrossOutBias,
  kFeedForwardInWeightT, kFeedForwardInBias, kFeedForwardOutWeightT, kFeedForwardOutBias,
  kNorm1Weight, kNorm1Bias, kNorm2Weight, kNorm2Bias, kNorm3Weight, kNorm3Bias,
  kParametersPerLayer
};

}  // namespace

// x [B, E] -> [B, E]. self_keys / self_values: each layer's [B, H, C, Dh] buffers, holding
// `cached` positions; the new key and value are written at position `cached` (C > cached,
// the caller grows them). cross_keys_t [B*H, Dh, S] and cross_values [B*H, S, Dh] per layer;
// cross_mask: the additive [B*H, 1, S] padding mask, or None.
Tensor decoder_step(Tensor x, const std::vector<Tensor>& parameters, const std::vector<Tensor>& self_keys,
                    const std::vector<Tensor>& self_values, int64_t cached, const std::vector<Tensor>& cross_keys_t,
                    const std::vector<Tensor>& cross_values, const c10::optional<Tensor>& cross_mask,
                    const c10::optional<Tensor>& final_norm_weight, const c10::optional<Tensor>& final_norm_bias,
                    int64_t heads, bool norm_first, double eps) {
  const int64_t batch = x.size(0), width = x.size(1), head_dim = width / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const Tensor zero = at::zeros({1, 1, 1}, x.options());  // the ignored input of beta=0 products
  for (size_t layer = 0; layer < self_keys.size(); ++layer) {
    const Tensor* p = parameters.data() + layer * kParametersPerLayer;
    auto self_attention = [&](const Tensor& h) {
      const Tensor qkv = at::addmm(p[kSelfQkvBias], h, p[kSelfQkvWeightT]).view({batch, 3, heads, head_dim});
      const Tensor& key_buffer = self_keys[layer];  // [B, H, C, Dh]
      const Tensor& value_buffer = self_values[layer];
      key_buffer.select(2, cached).copy_(qkv.select(1, 1));  // [B, H, Dh] written in place
      value_buffer.select(2, cached).copy_(qkv.select(1, 2));
      const int64_t capacity = key_buffer.size(2);
      const Tensor keys = key_buffer.view({batch * heads, capacity, head_dim}).narrow(1, 0, cached + 1);  // [B*H, t, Dh]
      const Tensor values = value_buffer.view({batch * heads, capacity, head_dim}).narrow(1, 0, cached + 1);
      const Tensor query = qkv.select(1, 0).reshape({batch * heads, 1, head_dim});  // [B*H, 1, Dh]
      const Tensor scores = at::baddbmm(zero, query, keys.transpose(1, 2), 0.0, scale);  // [B*H, 1, t]
      const Tensor context = at::bmm(at::_softmax(scores, -1, false), values);  // [B*H, 1, Dh]
      return at::addmm(p[kSelfOutBias], context.view({batch, width}), p[kSelfOutWeightT]);  // [B, E]
    };
    auto cross_attention = [&](const Tensor& h) {
      const Tensor query = at::addmm(p[kCrossQueryBias], h, p[kCrossQueryWeightT]).view({batch * heads, 1, head_dim});
      const Tensor scores = cross_mask.has_value()
                                ? at::baddbmm(*cross_mask, query, cross_keys_t[layer], 1.0, scale)
                                : at::baddbmm(zero, query, cross_keys_t[layer], 0.0, scale);  // [B*H, 1, S]
      const Tensor context = at::bmm(at::_softmax(scores, -1, false), cross_values[layer]);  // [B*H, 1, Dh]
      return at::addmm(p[kCrossOutBias], context.view({batch, width}), p[kCrossOutWeightT]);  // [B, E]
    };
    auto feed_forward = [&](const Tensor& h) {
      Tensor hidden = at::addmm(p[kFeedForwardInBias], h, p[kFeedForwardInWeightT]);  // [B, F]
      hidden.relu_();
      return at::addmm(p[kFeedForwardOutBias], hidden, p[kFeedForwardOutWeightT]);  // [B, E]
    };
    auto norm = [&](const Tensor& h, int64_t weight, int64_t bias) {
      return at::layer_norm(h, {width}, p[weight], p[bias], eps);
    };
    if (norm_first) {
      x = x + self_attention(norm(x, kNorm1Weight, kNorm1Bias));
      x = x + cross_attention(norm(x, kNorm2Weight, kNorm2Bias));
      x = x + feed_forward(norm(x, kNorm3Weight, kNorm3Bias));
    } else {
      x = norm(self_attention(x).add_(x), kNorm1Weight, kNorm1Bias);
      x = norm(cross_attention(x).add_(x), kNorm2Weight, kNorm2Bias);
      x = norm(feed_forward(x).add_(x), kNorm3Weight, kNorm3Bias);
    }
  }
  if (final_norm_weight.has_value()) {
    x = at::layer_norm(x, {width}, *final_norm_weight, *final_norm_bias, eps);
  }
  return x;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("decoder_step", &decoder_step, "One float32 decoder step for one new position (see the file's header).");
}
