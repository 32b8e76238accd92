// CPU reference of the fused multi-tensor SGD step against torch.optim.SGD's
// formula written out in double precision, plus its input checks.
#include "gradwire/kernels/cpu/fused_sgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace gradwire {
namespace kernels {
namespace {

struct Model {
  std::vector<std::vector<float>> p, g, m;
  std::vector<SgdTensor> Tensors() {
    std::vector<SgdTensor> t;
    for (size_t i = 0; i < p.size(); ++i)
      t.push_back({p[i].data(), g[i].data(), m[i].data(), p[i].size()});
    return t;
  }
};

Model RandomModel(std::mt19937& rng, const std::vector<size_t>& sizes) {
  std::normal_distribution<float> dist;
  Model m;
  for (size_t n : sizes) {
    m.p.emplace_back(n);
    m.g.emplace_back(n);
    m.m.emplace_back(n);
    for (size_t i = 0; i < n; ++i) {
      m.p.back()[i] = dist(rng);
      m.g.back()[i] = dist(rng);
      m.m.back()[i] = dist(rng);
    }
  }
  return m;
}

TEST(FusedSgdTest, MatchesTorchFormulaOverSeveralSteps) {
  std::mt19937 rng(std::random_device{}());
  Model model = RandomModel(rng, {1, 7, 1000, 16385, 0, 3});
  for (bool nesterov : {false, true}) {
    SgdOptions o;
    o.lr = 0.1f;
    o.momentum = 0.9f;
    o.weight_decay = 1e-4f;
    o.nesterov = nesterov;
    o.dampening = 0.0f;
    Model ref = model;
    for (int step = 0; step < 3; ++step) {
      o.first_step = step == 0;
      ASSERT_TRUE(cpu::FusedSgdStep(model.Tensors(), o).ok());
      for (size_t t = 0; t < ref.p.size(); ++t) {
        for (size_t i = 0; i < ref.p[t].size(); ++i) {
          double d = double(ref.g[t][i]) + double(o.weight_decay) * ref.p[t][i];
          double b = step == 0 ? d : double(o.momentum) * ref.m[t][i] + d;
          ref.m[t][i] = float(b);
          d = nesterov ? d + double(o.momentum) * b : b;
          ref.p[t][i] = float(ref.p[t][i] - double(o.lr) * d);
          EXPECT_NEAR(model.p[t][i], ref.p[t][i], 1e-5 * (1 + std::fabs(ref.p[t][i])));
          EXPECT_NEAR(model.m[t][i], ref.m[t][i], 1e-5 * (1 + std::fabs(ref.m[t][i])));
          ref.p[t][i] = model.p[t][i];  // follow the float trajectory
          ref.m[t][i] = model.m[t][i];
        }
      }
    }
  }
}

TEST(FusedSgdTest, PlainSgdLeavesMomentumAlone) {
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, 0.25f};
  SgdTensor t{p.data(), g.data(), nullptr, 2};
  SgdOptions o;
  o.lr = 0.5f;
  ASSERT_TRUE(cpu::FusedSgdStep({&t, 1}, o).ok());
  EXPECT_EQ(p[0], 0.75f);
  EXPECT_EQ(p[1], -2.125f);
}

TEST(FusedSgdTest, RejectsBadInputWithoutUpdating) {
  std::vector<float> p = {1.0f}, g = {1.0f};
  SgdTensor t{p.data(), g.data(), nullptr, 1};
  SgdOptions o;
  o.momentum = 0.9f;  // but no momentum buffer
  EXPECT_EQ(cpu::FusedSgdStep({&t, 1}, o).code(), absl::StatusCode::kInvalidArgument);
  o.momentum = 0.0f;
  o.lr = std::nanf("");
  EXPECT_EQ(cpu::FusedSgdStep({&t, 1}, o).code(), absl::StatusCode::kInvalidArgument);
  o.lr = 0.1f;
  o.nesterov = true;
  EXPECT_EQ(cpu::FusedSgdStep({&t, 1}, o).code(), absl::StatusCode::kInvalidArgument);
  SgdTensor missing{nullptr, g.data(), nullptr, 1};
  o.nesterov = false;
  EXPECT_EQ(cpu::FusedSgdStep({&missing, 1}, o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p[0], 1.0f);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
