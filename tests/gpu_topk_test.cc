// The CUDA selections (exact top-k, approximate top-k, random-k, 16-bit
// top-k) against their CPU references, on fresh random inputs (the seed is
// printed), with outputs and temp storage poisoned before each run:
// indices, values, new residual and stats bit for bit (NaN payloads aside);
// approximate top-k, whose CPU version fills the band from a sample-bounded
// candidate set, against its contract (same band, band filled in index
// order, EF rule).
//
// Every value format x error feedback combination runs every time. Beyond
// the sweeps: sizes that give every block of every grid-stride loop
// several iterations (more candidates than the output kernels' grid covers
// in one chunk each: > 8 * SMs * 4096), temp storage reused across calls
// and selectors without re-poisoning, a non-blocking stream, a CUDA graph
// replayed on new data, n = 2^32 behind GRADWIRE_GPU_LARGE. Without a GPU
// every test prints SKIPPED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gradwire/kernels/cpu/randomk.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/kernels/cuda/randomk.h"
#include "gradwire/kernels/cuda/topk.h"
#include "gradwire/kernels/element_math.h"
#include "tests/gpu_test_data.h"
#include "tests/gpu_test_util.h"

namespace gradwire {
namespace kernels {
namespace {

using testing::DeviceArray;

enum class Selector { kExact, kApprox, kRandom };
const Selector kSelectors[] = {Selector::kExact, Selector::kApprox, Selector::kRandom};
const char* Name(Selector s) {
  return s == Selector::kExact ? "exact" : s == Selector::kApprox ? "approx" : "random";
}

// How a case runs on the device.
struct DeviceRun {
  testing::TestStream* stream = nullptr;  // null: the legacy default stream
  DeviceArray<uint8_t>* temp = nullptr;   // reused (not re-poisoned); null: fresh, poisoned
};

// The CPU reference's result for one case.
struct Reference {
  FusedStats stats;
  ApproxTopKBand band;  // approximate top-k only
  std::vector<uint32_t> idx;
  std::vector<uint8_t> val;
  std::vector<float> residual;  // empty without error feedback
};

Reference RunCpu(Selector sel, const std::vector<float>& grad, std::vector<float> residual,
                 uint64_t k, ValueFormat format, uint64_t seed, uint64_t step) {
  const uint64_t n = grad.size();
  Reference r;
  r.idx.resize(k);
  r.val.resize(k * ValueWidth(format));
  uint64_t bytes = 0;
  cpu::TopKCompress(nullptr, &bytes, nullptr, nullptr, n, k, format, nullptr, nullptr, nullptr);
  std::vector<uint64_t> temp(bytes / 8 + 1);
  float* res = residual.empty() ? nullptr : residual.data();
  switch (sel) {
    case Selector::kExact:
      cpu::TopKCompress(temp.data(), &bytes, grad.data(), res, n, k, format, r.idx.data(),
                        r.val.data(), &r.stats);
      break;
    case Selector::kApprox:
      cpu::ApproxTopKCompress(temp.data(), &bytes, grad.data(), res, n, k, format, r.idx.data(),
                              r.val.data(), &r.stats, &r.band);
      break;
    case Selector::kRandom:
      cpu::RandomKCompress(temp.data(), &bytes, grad.data(), res, n, k, seed, step, format,
                           r.idx.data(), r.val.data(), &r.stats);
      break;
  }
  r.residual = std::move(residual);
  return r;
}

absl::Status CallGpu(Selector sel, void* temp, uint64_t* bytes, const float* grad, float* res,
                     uint64_t n, uint64_t k, ValueFormat format, uint64_t seed, uint64_t step,
                     uint32_t* idx, uint8_t* val, FusedStats* stats, ApproxTopKBand* band,
                     cuda::Stream stream) {
  switch (sel) {
    case Selector::kExact:
      return cuda::TopKCompress(temp, bytes, grad, res, n, k, format, idx, val, stats, stream);
    case Selector::kApprox:
      return cuda::ApproxTopKCompress(temp, bytes, grad, res, n, k, format, idx, val, stats, band,
                                      stream);
    case Selector::kRandom:
    default:
      return cuda::RandomKCompress(temp, bytes, grad, res, n, k, seed, step, format, idx, val,
                                   stats, stream);
  }
}

// The GPU's approximate top-k contract: everything above the band is
// selected, the band is filled with its lowest-index elements, nothing
// below it is taken; values and residuals follow the fused EF rule.
void CheckApprox(const std::vector<float>& grad, const std::vector<float>& residual, uint64_t k,
                 ValueFormat format, const ApproxTopKBand& band, const std::vector<uint32_t>& idx,
                 const std::vector<uint8_t>& val, const std::vector<float>& new_residual) {
  const uint64_t n = grad.size();
  const bool ef = !residual.empty();
  std::vector<float> acc(n);
  for (uint64_t i = 0; i < n; ++i) acc[i] = ef ? grad[i] + residual[i] : grad[i];
  std::vector<char> chosen(n, 0);
  uint64_t want_band = k - (k == 0 ? 0 : band.above);
  uint64_t j = 0;
  for (uint64_t i = 0; i < n && k > 0; ++i) {
    const uint32_t key = MagnitudeKey(acc[i]);
    const bool above = key >= band.upper_key;
    const bool in_band = key >= band.lower_key && key < band.upper_key;
    if (above || (in_band && want_band > 0)) {
      if (in_band) --want_band;
      chosen[i] = 1;
      ASSERT_LT(j, k) << "more than k elements qualify";
      ASSERT_EQ(idx[j], i) << "selected index " << j;
      const float v = LoadValue(val.data(), j, format);
      ASSERT_TRUE(testing::SameValue(v, RoundToFormat(acc[i], format))) << "value " << j;
      ++j;
    }
  }
  ASSERT_EQ(j, k) << "selected count";
  if (!ef) return;
  for (uint64_t i = 0; i < n; ++i) {
    const float want = ResidualAfter(acc[i], chosen[i] ? RoundToFormat(acc[i], format) : 0.0f);
    ASSERT_TRUE(testing::SameBits(want, new_residual[i])) << "residual " << i;
  }
}

void RunCase(Selector sel, Data data, uint64_t n, uint64_t k, ValueFormat format, bool ef,
             std::mt19937_64& rng, const DeviceRun& setup = DeviceRun()) {
  SCOPED_TRACE(::testing::Message() << Name(sel) << " data " << Name(data) << " n " << n << " k "
                                    << k << " format " << int(format) << " ef " << ef);
  const std::vector<float> grad = MakeData(data, n, rng);
  const std::vector<float> residual = ef ? MakeResidual(data, n, rng) : std::vector<float>();
  const uint64_t seed = rng(), step = rng() % 1000;
  const Reference want = RunCpu(sel, grad, residual, k, format, seed, step);
  // GPU, outputs poisoned.
  DeviceArray<float> d_grad(grad), d_res(residual);
  DeviceArray<uint32_t> d_idx(k);
  DeviceArray<uint8_t> d_val(k * ValueWidth(format));
  DeviceArray<FusedStats> d_stats(1);
  DeviceArray<ApproxTopKBand> d_band(1);
  ASSERT_EQ(d_grad.error() + d_res.error() + d_idx.Poison() + d_val.Poison() + d_stats.Poison() +
                d_band.Poison(),
            "");
  float* gres = ef ? d_res.get() : nullptr;
  cuda::Stream stream = setup.stream != nullptr ? setup.stream->get() : nullptr;
  uint64_t bytes = 0;
  ASSERT_TRUE(CallGpu(sel, nullptr, &bytes, nullptr, nullptr, n, k, format, seed, step, nullptr,
                      nullptr, nullptr, nullptr, stream)
                  .ok());
  DeviceArray<uint8_t> fresh(setup.temp != nullptr ? 0 : bytes);
  DeviceArray<uint8_t>* temp = setup.temp != nullptr ? setup.temp : &fresh;
  ASSERT_GE(temp->size(), bytes);
  if (setup.temp == nullptr) {
    ASSERT_EQ(temp->Poison(), "");  // nothing may rely on zeroed temp
  }
  ASSERT_EQ(testing::DeviceSynchronize(), "");  // uploads and poison land before `stream` runs
  bytes = temp->size();
  const absl::Status st =
      CallGpu(sel, temp->get(), &bytes, d_grad.get(), gres, n, k, format, seed, step, d_idx.get(),
              d_val.get(), d_stats.get(), d_band.get(), stream);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(setup.stream != nullptr ? setup.stream->Synchronize() : testing::DeviceSynchronize(),
            "");
  ExpectSameStats(want.stats, d_stats);
  if (sel == Selector::kApprox) {
    // Equal bands, and the GPU's own contract checked directly. (The CPU
    // fills its band the same way, all members in index order, its
    // sampled bound being a whole bin: with equal bands, equal indices.)
    const ApproxTopKBand b = d_band.Download()[0];
    EXPECT_EQ(b.lower_key, want.band.lower_key);
    EXPECT_EQ(b.upper_key, want.band.upper_key);
    EXPECT_EQ(b.above, want.band.above);
    EXPECT_GE(b.in_band, want.band.in_band);
    CheckApprox(grad, residual, k, format, b, d_idx.Download(), d_val.Download(),
                ef ? d_res.Download() : std::vector<float>());
    return;
  }
  ExpectSameBytes(want.idx, d_idx.Download(), "indices");
  ExpectSameValues(want.val, d_val.Download(), 0, k, format, "value");
  if (ef) ExpectSameFloats(want.residual, d_res.Download(), "residual");
  if (sel == Selector::kRandom) {  // receivers derive the same indices
    DeviceArray<uint32_t> d_only(k);
    ASSERT_EQ(d_only.Poison(), "");
    uint64_t b2 = 0;
    ASSERT_TRUE(cuda::RandomKIndices(nullptr, &b2, seed, step, n, k, nullptr, stream).ok());
    DeviceArray<uint8_t> t2(b2);
    ASSERT_EQ(testing::InOrder({t2.Poison(), testing::DeviceSynchronize()}), "");
    ASSERT_TRUE(cuda::RandomKIndices(t2.get(), &b2, seed, step, n, k, d_only.get(), stream).ok());
    if (setup.stream != nullptr) {
      ASSERT_EQ(setup.stream->Synchronize(), "");
    }
    ExpectSameBytes(want.idx, d_only.Download(), "random-k indices");
    // Values only (null indices, as a random-k frame is encoded): the same
    // values and residual.
    DeviceArray<float> d_res2(residual);
    DeviceArray<uint8_t> d_val2(k * ValueWidth(format));
    ASSERT_EQ(d_res2.error() + d_val2.Poison(), "");
    ASSERT_EQ(testing::DeviceSynchronize(), "");
    bytes = temp->size();
    ASSERT_TRUE(cuda::RandomKCompress(temp->get(), &bytes, d_grad.get(),
                                      ef ? d_res2.get() : nullptr, n, k, seed, step, format,
                                      nullptr, d_val2.get(), nullptr, stream)
                    .ok());
    ASSERT_EQ(setup.stream != nullptr ? setup.stream->Synchronize() : testing::DeviceSynchronize(),
              "");
    ExpectSameValues(want.val, d_val2.Download(), 0, k, format, "values-only value");
    if (ef) ExpectSameFloats(want.residual, d_res2.Download(), "values-only residual");
  }
}

std::vector<uint64_t> Ks(uint64_t n) {
  std::vector<uint64_t> ks = {0, n};
  if (n > 0) ks.push_back(1);
  for (double r : {0.001, 0.01, 0.1}) {
    const uint64_t k = static_cast<uint64_t>(r * n);
    if (k > 1 && k < n) ks.push_back(k);
  }
  return ks;
}

// Every size, distribution and k, each with every value format, with and
// without error feedback.
void Sweep(Selector sel) {
  GRADWIRE_GPU_SEEDED_RNG(rng);
  uint64_t turn = 0;
  for (uint64_t n : {0ull, 1ull, 1000ull, 4097ull, 100003ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 100003) continue;
    for (Data data : kAllData) {
      if (testing::QuickMode() && data != Data::kNormal && data != Data::kTies &&
          data != Data::kNonFinite) {
        continue;
      }
      for (uint64_t k : Ks(n)) {
        // Under the sanitizers (quick mode) one combination per case, in
        // turn, so that every one still runs.
        const int pick = static_cast<int>(turn++ % 6);
        for (int combo = 0; combo < 6; ++combo) {
          if (testing::QuickMode() && combo != pick) continue;
          RunCase(sel, data, n, k, kFormats[combo / 2], combo % 2 == 1, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(GpuTopKTest, ExactTopKMatchesCpuBitForBit) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  Sweep(Selector::kExact);
}

TEST(GpuTopKTest, ApproxTopKMeetsItsContract) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  Sweep(Selector::kApprox);
}

TEST(GpuTopKTest, RandomKMatchesCpuForTheSameSeed) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  Sweep(Selector::kRandom);
}

// How many candidates the selection collects for this input: elements whose
// top key digit is >= the k-th largest key's (host-side, to prove a case
// reaches the output kernels' chunk loops).
uint64_t Candidates(Selector sel, const std::vector<float>& acc, uint64_t k, uint64_t seed,
                    uint64_t step) {
  const uint64_t n = acc.size();
  const ElementKey stream_key = RandomKElementKey(seed, step, n);
  const int shift = sel == Selector::kRandom ? 21 : 20;
  std::vector<uint32_t> keys(n);
  for (uint64_t i = 0; i < n; ++i) {
    keys[i] = sel == Selector::kRandom ? ~RandomKKey(stream_key, i) : MagnitudeKey(acc[i]);
  }
  std::vector<uint32_t> sorted = keys;
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(),
                   [](uint32_t a, uint32_t b) { return a > b; });
  const uint32_t band = sorted[k - 1] >> shift;
  return std::count_if(keys.begin(), keys.end(), [&](uint32_t x) { return (x >> shift) >= band; });
}

// Sizes where every loop runs several times per block: level 0 and the
// fix-up loop over n, the candidate histograms over > 4 * 2 * SMs * 512
// candidates and the chunk loops over > 2 * 8 * SMs chunks of 4096 (on an
// H100: > 8.6M candidates). The case asserts its own candidate count.
TEST(GpuTopKTest, ManyCandidateChunksPerBlock) {
  GRADWIRE_GPU_TEST(rng);
  GRADWIRE_GPU_SMS(sms);
  // Quick mode (racecheck): the zeros case alone, two chunks per block.
  const uint64_t want_candidates = (testing::QuickMode() ? 1 : 2) * 8 * sms * 4096;
  struct Big {
    Selector sel;
    Data data;
    uint64_t n, k;
  };
  const uint64_t n = 2 * want_candidates + 4097;
  const Big cases[] = {
      {Selector::kExact, Data::kZeros, n, 1},            // every element ties: all are candidates
      {Selector::kExact, Data::kTies, n, n / 3},         // |x| in {0, .25, .5, .75}: 4/7 of n
      {Selector::kApprox, Data::kZeros, n, n / 2},       // one band of n, filled by index
      {Selector::kRandom, Data::kNormal, n, n * 2 / 3},  // candidates ~ k + n / 2048
  };
  for (const Big& c : cases) {
    const uint64_t seed = rng(), step = rng() % 1000;
    std::mt19937_64 data_rng(seed);
    const std::vector<float> grad = MakeData(c.data, c.n, data_rng);
    const uint64_t m = Candidates(c.sel, grad, c.k, seed, step);
    std::printf("%s %s n=%llu k=%llu: %llu candidates\n", Name(c.sel), Name(c.data).c_str(),
                static_cast<unsigned long long>(c.n), static_cast<unsigned long long>(c.k),
                static_cast<unsigned long long>(m));
    EXPECT_GT(m, want_candidates);  // of grad alone: with EF, acc differs a little
    for (bool ef : {false, true}) {
      RunCase(c.sel, c.data, c.n, c.k, ValueFormat::kBf16, ef, rng);
      if (HasFatalFailure()) return;
    }
    if (testing::QuickMode()) return;
  }
}

// 16-bit gradients: the 2^15-bin path equals fp32 top-k on widened input,
// over every distribution (negative values, ±Inf, NaN, subnormals and the
// values that saturate fp16 included) and a size where each of the one
// block per SM loops many times.
TEST(GpuTopKTest, SixteenBitTopKMatchesWidenedCpu) {
  GRADWIRE_GPU_TEST(rng);
  GRADWIRE_GPU_SMS(sms);
  for (ValueFormat in : {ValueFormat::kFp16, ValueFormat::kBf16}) {
    for (Data data : kAllData) {
      for (uint64_t n :
           {uint64_t{1}, uint64_t{5000}, uint64_t{1} << 20, 4 * sms * 512 * 16 + 333}) {
        if (testing::QuickMode() && n > 5000) continue;
        const bool big = n > (1ull << 20);  // each SM's block loops >= 4 times: fewer cases
        if (big && data != Data::kNormal && data != Data::kSpecials) continue;
        for (uint64_t k : Ks(n)) {
          if (big && k != n / 100) continue;
          for (ValueFormat out : kFormats) {
            SCOPED_TRACE(::testing::Message() << "in " << int(in) << " out " << int(out) << " data "
                                              << Name(data) << " n " << n << " k " << k);
            const std::vector<float> raw = MakeData(data, n, rng);
            std::vector<uint16_t> bits(n);
            std::vector<float> widened(n);
            for (uint64_t i = 0; i < n; ++i) {
              bits[i] =
                  in == ValueFormat::kFp16 ? FloatToHalfBits(raw[i]) : FloatToBf16Bits(raw[i]);
              widened[i] =
                  in == ValueFormat::kFp16 ? HalfBitsToFloat(bits[i]) : Bf16BitsToFloat(bits[i]);
            }
            const Reference want = RunCpu(Selector::kExact, widened, {}, k, out, 0, 0);
            DeviceArray<uint16_t> d_bits(bits);
            DeviceArray<uint32_t> d_idx(k);
            DeviceArray<uint8_t> d_val(k * ValueWidth(out));
            DeviceArray<FusedStats> d_stats(1);
            ASSERT_EQ(d_idx.Poison() + d_val.Poison() + d_stats.Poison(), "");
            uint64_t bytes = 0;
            ASSERT_TRUE(cuda::TopKCompress16(nullptr, &bytes, nullptr, in, n, k, out, nullptr,
                                             nullptr, nullptr, nullptr)
                            .ok());
            DeviceArray<uint8_t> temp(bytes);
            ASSERT_EQ(temp.Poison(), "");
            ASSERT_TRUE(cuda::TopKCompress16(temp.get(), &bytes, d_bits.get(), in, n, k, out,
                                             d_idx.get(), d_val.get(), d_stats.get(), nullptr)
                            .ok());
            ASSERT_EQ(testing::DeviceSynchronize(), "");
            ExpectSameBytes(want.idx, d_idx.Download(), "indices");
            ExpectSameValues(want.val, d_val.Download(), 0, k, out, "value");
            ExpectSameStats(want.stats, d_stats);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// One temp buffer, never re-poisoned, serves call after call: new data,
// other k, other selectors, other n (smaller than the buffer was sized for).
TEST(GpuTopKTest, TempStorageReusedAcrossCallsAndSelectors) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = testing::QuickMode() ? 20000 : 3000017;
  uint64_t bytes = 0;
  for (Selector sel : kSelectors) {
    uint64_t b = 0;
    ASSERT_TRUE(CallGpu(sel, nullptr, &b, nullptr, nullptr, n, 1, ValueFormat::kFp32, 0, 0, nullptr,
                        nullptr, nullptr, nullptr, nullptr)
                    .ok());
    bytes = std::max(bytes, b);
  }
  DeviceArray<uint8_t> temp(bytes);
  ASSERT_EQ(temp.Poison(), "");
  DeviceRun setup;
  setup.temp = &temp;
  for (int round = 0; round < 2; ++round) {
    for (Selector sel : kSelectors) {
      RunCase(sel, Data::kNormal, n, n / 100, ValueFormat::kFp16, true, rng, setup);
      RunCase(sel, Data::kTies, n / 3 + 1, n / 7, ValueFormat::kFp32, round == 0, rng, setup);
      RunCase(sel, Data::kNonFinite, 4097, 40, ValueFormat::kBf16, true, rng, setup);
      if (HasFatalFailure()) return;
    }
  }
}

// On a stream that does not synchronize with the legacy default stream:
// all of a call's work must be on `stream` (a memset or a launch left on
// the default stream would race with the rest).
TEST(GpuTopKTest, NonBlockingStream) {
  GRADWIRE_GPU_TEST(rng);
  testing::TestStream stream;
  ASSERT_EQ(stream.error(), "");
  DeviceRun setup;
  setup.stream = &stream;
  const uint64_t n = testing::QuickMode() ? 50000 : 2000003;
  for (Selector sel : kSelectors) {
    for (ValueFormat format : kFormats) {
      RunCase(sel, Data::kHeavyTail, n, n / 1000, format, true, rng, setup);
      RunCase(sel, Data::kZeros, n, 0, format, true, rng, setup);
      RunCase(sel, Data::kTies, n, n, format, false, rng, setup);
      if (HasFatalFailure()) return;
    }
  }
}

// A call captured into a CUDA graph (global capture mode) and replayed:
// each replay reads the buffers' current contents, so three replays on new
// gradients are three steps of error feedback, checked against three CPU
// steps.
TEST(GpuTopKTest, GraphReplayMatchesCpuStepByStep) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = testing::QuickMode() ? 30011 : 1000003, k = n / 100;
  for (Selector sel : kSelectors) {
    SCOPED_TRACE(Name(sel));
    const ValueFormat format = ValueFormat::kFp16;
    const uint64_t seed = rng(), step = 17;
    testing::TestStream stream;
    DeviceArray<float> d_grad(n), d_res(n);
    DeviceArray<uint32_t> d_idx(k);
    DeviceArray<uint8_t> d_val(2 * k);
    DeviceArray<FusedStats> d_stats(1);
    DeviceArray<ApproxTopKBand> d_band(1);
    std::vector<float> residual = MakeData(Data::kNormal, n, rng);
    ASSERT_EQ(stream.error() + d_res.Upload(residual), "");
    uint64_t bytes = 0;
    ASSERT_TRUE(CallGpu(sel, nullptr, &bytes, nullptr, nullptr, n, k, format, seed, step, nullptr,
                        nullptr, nullptr, nullptr, stream.get())
                    .ok());
    DeviceArray<uint8_t> temp(bytes);
    ASSERT_EQ(testing::InOrder({temp.Poison(), testing::DeviceSynchronize()}), "");
    testing::TestGraph graph;
    ASSERT_EQ(graph.Begin(stream.get()), "");
    const absl::Status captured =
        CallGpu(sel, temp.get(), &bytes, d_grad.get(), d_res.get(), n, k, format, seed, step,
                d_idx.get(), d_val.get(), d_stats.get(), d_band.get(), stream.get());
    ASSERT_EQ(graph.End(), "");
    ASSERT_TRUE(captured.ok()) << captured;
    std::printf("%s: graph of %d nodes\n", Name(sel), graph.nodes());
    for (int replay = 0; replay < 3; ++replay) {
      SCOPED_TRACE(::testing::Message() << "replay " << replay);
      const std::vector<float> grad = MakeData(Data::kNormal, n, rng);
      ASSERT_EQ(d_grad.Upload(grad) + d_idx.Poison() + d_val.Poison() + d_stats.Poison(), "");
      ASSERT_EQ(testing::DeviceSynchronize(), "");
      ASSERT_EQ(testing::InOrder({graph.Launch(), stream.Synchronize()}), "");
      const Reference want = RunCpu(sel, grad, residual, k, format, seed, step);
      ExpectSameStats(want.stats, d_stats);
      if (sel == Selector::kApprox) {
        CheckApprox(grad, residual, k, format, d_band.Download()[0], d_idx.Download(),
                    d_val.Download(), d_res.Download());
        residual = d_res.Download();  // the GPU's band members: continue from its residual
      } else {
        ExpectSameBytes(want.idx, d_idx.Download(), "indices");
        ExpectSameValues(want.val, d_val.Download(), 0, k, format, "value");
        ExpectSameFloats(want.residual, d_res.Download(), "residual");
        residual = want.residual;
      }
      if (HasFatalFailure()) return;
    }
  }
}

TEST(GpuTopKTest, RejectsBadArgumentsBeforeWriting) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  DeviceArray<float> g(8);
  DeviceArray<FusedStats> stats(1);
  ASSERT_EQ(stats.Poison(), "");
  uint64_t bytes = 0;
  ASSERT_TRUE(cuda::TopKCompress(nullptr, &bytes, g.get(), nullptr, 8, 9, ValueFormat::kFp32,
                                 nullptr, nullptr, nullptr, nullptr)
                  .ok());  // the size query checks nothing else
  DeviceArray<uint8_t> temp(bytes);
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(cuda::TopKCompress(temp.get(), &bytes, g.get(), nullptr, 8, 9, ValueFormat::kFp32,
                               nullptr, nullptr, stats.get(), nullptr)
                .code(),
            kInvalid);
  uint64_t small = 16;
  DeviceArray<uint32_t> idx(4);
  DeviceArray<uint8_t> val(16);
  EXPECT_EQ(cuda::TopKCompress(temp.get(), &small, g.get(), nullptr, 8, 4, ValueFormat::kFp32,
                               idx.get(), val.get(), stats.get(), nullptr)
                .code(),
            kInvalid);
  EXPECT_EQ(
      cuda::RandomKCompress(temp.get(), &bytes, g.get(), nullptr, 8, 4, 1, 2,
                            static_cast<ValueFormat>(9), idx.get(), val.get(), stats.get(), nullptr)
          .code(),
      kInvalid);
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  const FusedStats s = stats.Download()[0];
  EXPECT_EQ(s.selected, ~uint64_t{0});  // still the poison: refused calls write nothing
}

// n = 2^32, the documented maximum (u32 indices up to 2^32 - 1): ~50 GB of
// device and ~70 GB of host memory, so only with GRADWIRE_GPU_LARGE=1
// (tools/gpu/run_on_device.sh run large). Exact top-k with error feedback
// against the CPU, on hash-generated data with the largest magnitudes
// planted at the very end of the range.
TEST(GpuTopKTest, AtTwoToThe32) {
  GRADWIRE_SKIP_UNLESS_LARGE("n = 2^32");
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = uint64_t{1} << 32, k = 4096;
  std::vector<float> grad = FastData(n, rng());
  for (uint64_t i = n - 100; i < n; ++i) grad[i] = 1000.0f + static_cast<float>(n - i);
  std::vector<float> residual = FastData(n, rng());
  DeviceArray<float> d_grad(grad), d_res(residual);
  ASSERT_EQ(d_grad.error() + d_res.error(), "");
  const Reference want =
      RunCpu(Selector::kExact, grad, std::move(residual), k, ValueFormat::kFp32, 0, 0);
  grad = std::vector<float>();  // host memory back before the device results come in
  ASSERT_EQ(want.idx.back(), n - 1);
  DeviceArray<uint32_t> d_idx(k);
  DeviceArray<uint8_t> d_val(4 * k);
  DeviceArray<FusedStats> d_stats(1);
  uint64_t bytes = 0;
  ASSERT_TRUE(cuda::TopKCompress(nullptr, &bytes, nullptr, nullptr, n, k, ValueFormat::kFp32,
                                 nullptr, nullptr, nullptr, nullptr)
                  .ok());
  DeviceArray<uint8_t> temp(bytes);
  ASSERT_EQ(temp.error() + d_idx.Poison() + d_val.Poison(), "");
  ASSERT_TRUE(cuda::TopKCompress(temp.get(), &bytes, d_grad.get(), d_res.get(), n, k,
                                 ValueFormat::kFp32, d_idx.get(), d_val.get(), d_stats.get(),
                                 nullptr)
                  .ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  ExpectSameBytes(want.idx, d_idx.Download(), "indices");
  ExpectSameValues(want.val, d_val.Download(), 0, k, ValueFormat::kFp32, "value");
  ExpectSameStats(want.stats, d_stats);
  ExpectSameFloats(want.residual, d_res.Download(), "residual");
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
