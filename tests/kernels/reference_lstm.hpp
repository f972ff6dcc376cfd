// Plain-loop LSTM in double precision with full backpropagation through time: a test oracle only,
// checked against finite differences; the device's LSTM kernel (oneDNN) is checked against it.
// Layout as kernels/sequence_kernels.hpp: x [batch x steps x inputs], parameters W_x
// [inputs x 4 x hidden], W_h [hidden x 4 x hidden], b [4 x hidden], gates i, f, g, o.
#pragma once

#include <cmath>
#include <vector>

#include "kernels/sequence_kernels.hpp"

namespace dlscale::reference {

struct LstmResult {
  std::vector<double> output, input_gradient, parameter_gradient;
};

inline LstmResult lstm(const kernels::LstmGeometry& g, int batch, const std::vector<double>& x,
                       const std::vector<double>& parameters, const std::vector<double>& dy) {
  const int T = g.steps, I = g.inputs, H = g.hidden;
  const double* wx = parameters.data();
  const double* wh = wx + g.input_weight_count();
  const double* b = wh + g.recurrent_weight_count();
  const auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  LstmResult r{std::vector<double>(std::size_t(batch) * T * H), std::vector<double>(x.size()),
               std::vector<double>(parameters.size())};
  double* dwx = r.parameter_gradient.data();
  double* dwh = dwx + g.input_weight_count();
  double* db = dwh + g.recurrent_weight_count();

  for (int n = 0; n < batch; ++n) {
    // Forward, keeping every step's gates and states: gates[t][k*H + j] for gate k.
    std::vector<std::vector<double>> gates(T, std::vector<double>(4 * H));
    std::vector<std::vector<double>> h(T + 1, std::vector<double>(H)),
        c(T + 1, std::vector<double>(H));
    const auto input = [&](int t, int i) { return x[(std::size_t(n) * T + t) * I + i]; };
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < H; ++j) {
          double z = b[k * H + j];
          for (int i = 0; i < I; ++i) z += input(t, i) * wx[(i * 4 + k) * H + j];
          for (int i = 0; i < H; ++i) z += h[t][i] * wh[(i * 4 + k) * H + j];
          gates[t][k * H + j] = k == 2 ? std::tanh(z) : sigmoid(z);
        }
      for (int j = 0; j < H; ++j) {
        const double ig = gates[t][j], fg = gates[t][H + j], gg = gates[t][2 * H + j],
                     og = gates[t][3 * H + j];
        c[t + 1][j] = fg * c[t][j] + ig * gg;
        h[t + 1][j] = og * std::tanh(c[t + 1][j]);
        r.output[(std::size_t(n) * T + t) * H + j] = h[t + 1][j];
      }
    }
    // Backward through time.
    std::vector<double> dh_next(H, 0.0), dc_next(H, 0.0), dz(4 * H);
    for (int t = T - 1; t >= 0; --t) {
      for (int j = 0; j < H; ++j) {
        const double ig = gates[t][j], fg = gates[t][H + j], gg = gates[t][2 * H + j],
                     og = gates[t][3 * H + j];
        const double dh = dy[(std::size_t(n) * T + t) * H + j] + dh_next[j];
        const double tanh_c = std::tanh(c[t + 1][j]);
        const double dc = dc_next[j] + dh * og * (1 - tanh_c * tanh_c);
        dz[j] = dc * gg * ig * (1 - ig);
        dz[H + j] = dc * c[t][j] * fg * (1 - fg);
        dz[2 * H + j] = dc * ig * (1 - gg * gg);
        dz[3 * H + j] = dh * tanh_c * og * (1 - og);
        dc_next[j] = dc * fg;
      }
      std::fill(dh_next.begin(), dh_next.end(), 0.0);
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < H; ++j) {
          const double d = dz[k * H + j];
          db[k * H + j] += d;
          for (int i = 0; i < I; ++i) {
            dwx[(i * 4 + k) * H + j] += input(t, i) * d;
            r.input_gradient[(std::size_t(n) * T + t) * I + i] += wx[(i * 4 + k) * H + j] * d;
          }
          for (int i = 0; i < H; ++i) {
            dwh[(i * 4 + k) * H + j] += h[t][i] * d;
            dh_next[i] += wh[(i * 4 + k) * H + j] * d;
          }
        }
    }
  }
  return r;
}

}  // namespace dlscale::reference
