// CPU reference for summing workers' sparse payloads: order, averaging,
// 16-bit values, and rejection of malformed payloads with dense untouched.
#include "gradwire/kernels/cpu/sparse_sum.h"

#include <gtest/gtest.h>

#include <vector>

namespace gradwire {
namespace kernels {
namespace {

template <typename T>
const uint8_t* Bytes(const std::vector<T>& v) {  // little-endian host: the wire layout
  return reinterpret_cast<const uint8_t*>(v.data());
}

TEST(SparseSumTest, SumsWorkersAndAverages) {
  std::vector<uint32_t> i0 = {0, 3}, i1 = {3, 4};
  std::vector<float> v0 = {1.0f, 2.0f}, v1 = {4.0f, -8.0f};
  std::vector<SparsePayload> p = {{i0.data(), Bytes(v0), 2, ValueFormat::kFp32},
                                  {i1.data(), Bytes(v1), 2, ValueFormat::kFp32}};
  std::vector<float> dense(5, 100.0f);
  ASSERT_TRUE(cpu::SparseSumToDense(p, absl::MakeSpan(dense), {false, 0.5f}).ok());
  EXPECT_EQ(dense, (std::vector<float>{0.5f, 0.0f, 0.0f, 3.0f, -4.0f}));
  ASSERT_TRUE(cpu::SparseSumToDense(p, absl::MakeSpan(dense), {true, 1.0f}).ok());
  EXPECT_EQ(dense, (std::vector<float>{1.5f, 0.0f, 0.0f, 9.0f, -12.0f}));
}

TEST(SparseSumTest, WidensHalfAndBfloat16Exactly) {
  std::vector<uint32_t> idx = {1, 2, 3};
  std::vector<uint16_t> half = {0x3C00, 0xC000, 0x0001};  // 1, -2, smallest subnormal
  std::vector<uint16_t> bf = {0x3F80, 0x4040, 0xFF80};    // 1, 3, -inf
  std::vector<float> dense(4);
  ASSERT_TRUE(cpu::SparseSumToDense({{idx.data(), Bytes(half), 3, ValueFormat::kFp16}},
                                    absl::MakeSpan(dense), {})
                  .ok());
  EXPECT_EQ(dense, (std::vector<float>{0.0f, 1.0f, -2.0f, 5.9604645e-8f}));
  ASSERT_TRUE(cpu::SparseSumToDense({{idx.data(), Bytes(bf), 3, ValueFormat::kBf16}},
                                    absl::MakeSpan(dense), {})
                  .ok());
  EXPECT_EQ(dense[1], 1.0f);
  EXPECT_EQ(dense[2], 3.0f);
  EXPECT_EQ(dense[3], -INFINITY);
}

TEST(SparseSumTest, RejectsMalformedPayloadsWithoutTouchingDense) {
  std::vector<float> dense(4, 7.0f), vals = {1, 2};
  std::vector<uint32_t> out_of_range = {1, 4}, unsorted = {2, 1}, dup = {2, 2};
  for (auto* idx : {&out_of_range, &unsorted, &dup}) {
    EXPECT_EQ(cpu::SparseSumToDense({{idx->data(), Bytes(vals), 2, ValueFormat::kFp32}},
                                    absl::MakeSpan(dense), {})
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(cpu::SparseSumToDense({{nullptr, Bytes(vals), 2, ValueFormat::kFp32}},
                                  absl::MakeSpan(dense), {})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dense, std::vector<float>(4, 7.0f));
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
