// Naive double-precision references (see reference.h). Clarity over speed: every loop mirrors a
// formula of core/op_args.h, with no blocking, no online softmax and no shared helpers with the
// kernels, so that a kernel bug cannot be mirrored here.
#include "tests/ops/reference.h"

#include <cmath>
#include <stdexcept>

namespace h2::ref {

Vec add(const Vec& a, const Vec* b, double alpha, double beta) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = alpha * a[i] + (b ? beta * (*b)[i] : 0.0);
  return out;
}

double sum(const Vec& x) {
  double s = 0;
  for (double e : x) s += e;
  return s;
}

double sum_squares(const Vec& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return s;
}

Vec matmul(const Vec& a, const Vec& b, const Vec& out, const MatmulDims& d, double alpha,
           double beta) {
  Vec result(size_t(d.S * d.M * d.N));
  for (int64_t s = 0; s < d.S; ++s) {
    const double* as = a.data() + s * d.M * d.K;
    const double* bs = b.data() + (d.b_shared ? 0 : s * d.K * d.N);
    for (int64_t m = 0; m < d.M; ++m) {
      for (int64_t n = 0; n < d.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < d.K; ++k) {
          double av = d.trans_a ? as[k * d.M + m] : as[m * d.K + k];
          double bv = d.trans_b ? bs[n * d.K + k] : bs[k * d.N + n];
          acc += av * bv;
        }
        size_t o = size_t((s * d.M + m) * d.N + n);
        result[o] = alpha * acc + (beta != 0 ? beta * out[o] : 0.0);
      }
    }
  }
  return result;
}

Vec embedding_fwd(const Vec& table, const Ids& ids, int64_t C) {
  Vec out(ids.size() * size_t(C));
  for (size_t n = 0; n < ids.size(); ++n)
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = table[size_t(ids[n] * C + c)];
  return out;
}

void embedding_bwd(Vec& dtable, const Vec& dout, const Ids& ids, int64_t C) {
  for (size_t n = 0; n < ids.size(); ++n)
    for (int64_t c = 0; c < C; ++c) dtable[size_t(ids[n] * C + c)] += dout[n * C + c];
}

RmsNormOut rms_norm_fwd(const Vec& x, const Vec& weight, int64_t C, double eps) {
  size_t N = C > 0 ? x.size() / size_t(C) : 0;
  RmsNormOut r{Vec(x.size()), Vec(N)};
  for (size_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[n * C + c] * x[n * C + c];
    double rstd = 1.0 / std::sqrt(ms / double(C) + eps);
    r.rstd[n] = rstd;
    for (int64_t c = 0; c < C; ++c) r.out[n * C + c] = x[n * C + c] * rstd * weight[size_t(c)];
  }
  return r;
}

RmsNormGrads rms_norm_bwd(const Vec& dout, const Vec& x, const Vec& weight, int64_t C, double eps) {
  // y_j = x_j r w_j with r = (mean(x^2) + eps)^(-1/2), so dr/dx_j = -r^3 x_j / C and
  // dx_j = r w_j g_j - r^3 x_j / C * sum_i g_i w_i x_i; dweight_j = sum_n g_j x_j r.
  RmsNormOut f = rms_norm_fwd(x, weight, C, eps);
  RmsNormGrads g{Vec(x.size()), Vec(size_t(C), 0.0)};
  for (size_t n = 0; n < f.rstd.size(); ++n) {
    double r = f.rstd[n], dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += dout[n * C + c] * weight[size_t(c)] * x[n * C + c];
    for (int64_t c = 0; c < C; ++c) {
      size_t i = n * C + c;
      g.dx[i] = r * weight[size_t(c)] * dout[i] - r * r * r * x[i] / double(C) * dot;
      g.dweight[size_t(c)] += dout[i] * x[i] * r;
    }
  }
  return g;
}

Vec rope(const Vec& x, int64_t B, int64_t T, int64_t H, int64_t D, double theta, int64_t offset,
         int direction, const Vec& inv_freq) {
  Vec out(x.size());
  int64_t half = D / 2;
  Vec freq = inv_freq;
  if (freq.empty())
    for (int64_t i = 0; i < half; ++i) freq.push_back(std::pow(theta, -2.0 * double(i) / D));
  if (freq.size() != size_t(half))
    throw std::invalid_argument("ref::rope: inv_freq needs D/2 values");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        size_t base = size_t(((b * T + t) * H + h) * D);
        for (int64_t i = 0; i < half; ++i) {
          double angle = direction * double(offset + t) * freq[size_t(i)];
          double c = std::cos(angle), s = std::sin(angle);
          double x1 = x[base + i], x2 = x[base + i + half];
          out[base + i] = x1 * c - x2 * s;
          out[base + i + half] = x2 * c + x1 * s;
        }
      }
  return out;
}

Vec llama3_inv_freq(int64_t D, double theta, double factor, double low_freq_factor,
                    double high_freq_factor, double original_max_positions) {
  Vec out;
  for (int64_t i = 0; i < D / 2; ++i) {
    const double freq = 1.0 / std::pow(theta, double(2 * i) / double(D));
    const double wavelength = 2 * M_PI / freq;
    const double low_wavelength = original_max_positions / low_freq_factor;
    const double high_wavelength = original_max_positions / high_freq_factor;
    if (wavelength < high_wavelength) {
      out.push_back(freq);
    } else if (wavelength > low_wavelength) {
      out.push_back(freq / factor);
    } else {
      const double smooth = (original_max_positions / wavelength - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
      out.push_back((1 - smooth) * freq / factor + smooth * freq);
    }
  }
  return out;
}

double AttnDims::effective_scale() const {
  return scale != 0 ? scale : 1.0 / std::sqrt(double(D));
}

namespace {

// Index helpers for (B, T, heads, D) and (B, H, T) layouts.
size_t at(const AttnDims& d, int64_t heads, int64_t b, int64_t t, int64_t h) {
  return size_t(((b * d.T + t) * heads + h) * d.D);
}

// Softmax probabilities of query (b, t, h) over keys 0..t, and their logsumexp.
Vec probs(const Vec& q, const Vec& k, const AttnDims& d, int64_t b, int64_t t, int64_t h,
          double* lse) {
  int64_t kvh = h / (d.H / d.Hkv);
  Vec s(size_t(t + 1));
  double mx = -INFINITY;
  for (int64_t j = 0; j <= t; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < d.D; ++e)
      dot += q[at(d, d.H, b, t, h) + e] * k[at(d, d.Hkv, b, j, kvh) + e];
    s[size_t(j)] = d.effective_scale() * dot;
    mx = std::max(mx, s[size_t(j)]);
  }
  double z = 0;
  for (double x : s) z += std::exp(x - mx);
  *lse = mx + std::log(z);
  for (double& x : s) x = std::exp(x - *lse);
  return s;
}

}  // namespace

AttnOut attention_fwd(const Vec& q, const Vec& k, const Vec& v, const AttnDims& d) {
  if (d.Hkv <= 0 || d.H % d.Hkv != 0) throw std::invalid_argument("H % Hkv != 0");
  AttnOut r{Vec(q.size(), 0.0), Vec(size_t(d.B * d.H * d.T))};
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < d.T; ++t) {
        double lse;
        Vec p = probs(q, k, d, b, t, h, &lse);
        r.lse[size_t((b * d.H + h) * d.T + t)] = lse;
        int64_t kvh = h / (d.H / d.Hkv);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t e = 0; e < d.D; ++e)
            r.out[at(d, d.H, b, t, h) + e] += p[size_t(j)] * v[at(d, d.Hkv, b, j, kvh) + e];
      }
  return r;
}

AttnGrads attention_bwd(const Vec& dout, const Vec& q, const Vec& k, const Vec& v, const Vec& out,
                        const AttnDims& d) {
  // dP_j = dout . v_j; D = dout . out; dS_j = P_j (dP_j - D);
  // dq = scale sum_j dS_j k_j; dk_j += scale dS_j q; dv_j += P_j dout.
  AttnGrads g{Vec(q.size(), 0.0), Vec(k.size(), 0.0), Vec(v.size(), 0.0)};
  double scale = d.effective_scale();
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < d.T; ++t) {
        double lse;
        Vec p = probs(q, k, d, b, t, h, &lse);
        int64_t kvh = h / (d.H / d.Hkv);
        size_t qi = at(d, d.H, b, t, h);
        double Di = 0;
        for (int64_t e = 0; e < d.D; ++e) Di += dout[qi + e] * out[qi + e];
        for (int64_t j = 0; j <= t; ++j) {
          size_t kj = at(d, d.Hkv, b, j, kvh);
          double dp = 0;
          for (int64_t e = 0; e < d.D; ++e) dp += dout[qi + e] * v[kj + e];
          double ds = p[size_t(j)] * (dp - Di);
          for (int64_t e = 0; e < d.D; ++e) {
            g.dq[qi + e] += scale * ds * k[kj + e];
            g.dk[kj + e] += scale * ds * q[qi + e];
            g.dv[kj + e] += p[size_t(j)] * dout[qi + e];
          }
        }
      }
  return g;
}

Vec swiglu_fwd(const Vec& gate, const Vec& up) {
  Vec out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) out[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
  return out;
}

SwigluGrads swiglu_bwd(const Vec& dout, const Vec& gate, const Vec& up) {
  // silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g).
  SwigluGrads r{Vec(gate.size()), Vec(gate.size())};
  for (size_t i = 0; i < gate.size(); ++i) {
    double g = gate[i], s = 1 / (1 + std::exp(-g));
    r.dgate[i] = dout[i] * up[i] * s * (1 + g * (1 - s));
    r.dup[i] = dout[i] * g * s;
  }
  return r;
}

CrossEntropyOut cross_entropy_fwd(const Vec& logits, const Ids& targets, int64_t V,
                                  int64_t ignore_index) {
  CrossEntropyOut r{Vec(targets.size()), Vec(targets.size())};
  for (size_t n = 0; n < targets.size(); ++n) {
    double mx = -INFINITY, z = 0;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, logits[n * V + c]);
    for (int64_t c = 0; c < V; ++c) z += std::exp(logits[n * V + c] - mx);
    r.lse[n] = mx + std::log(z);
    r.losses[n] = targets[n] == ignore_index ? 0.0 : r.lse[n] - logits[n * V + size_t(targets[n])];
  }
  return r;
}

Vec cross_entropy_bwd(const Vec& logits, const Ids& targets, int64_t V, double dloss,
                      int64_t ignore_index) {
  CrossEntropyOut f = cross_entropy_fwd(logits, targets, V, ignore_index);
  Vec d(logits.size(), 0.0);
  for (size_t n = 0; n < targets.size(); ++n) {
    if (targets[n] == ignore_index) continue;
    for (int64_t c = 0; c < V; ++c)
      d[n * V + c] = (std::exp(logits[n * V + c] - f.lse[n]) - (c == targets[n] ? 1 : 0)) * dloss;
  }
  return d;
}

void adamw_step(Vec& param, Vec& m, Vec& v, const Vec& grad, const AdamwHyper& h, int64_t step) {
  double bc1 = 1 - std::pow(h.beta1, double(step)), bc2 = 1 - std::pow(h.beta2, double(step));
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * h.grad_scale;
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
    double update = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + h.eps) + h.weight_decay * param[i];
    param[i] -= h.lr * update;
  }
}

}  // namespace h2::ref
