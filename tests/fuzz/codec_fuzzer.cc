// libFuzzer target for every codec's decoders (DecodeAccumulate and
// DecodeAverage) on frames that pass the checksum.
//
// wire_format_fuzzer reaches the frame parser and the index decoders; the
// codecs' own checks (header fields against the spec, value and scale
// bytes, indices against n, the quantizers' overflow rule) and the
// kernels behind them (the vectorized QSGD, sign, cast and sparse
// averages, random-k's index derivation) are reached only by a frame
// whose checksum holds. So each input picks a codec and a gradient
// length, encodes a valid frame of a seeded gradient, overwrites bytes of
// it as the input says (or replaces it by the input's bytes), changes its
// length, and recomputes the checksum (unless the input says not to).
//
// Beyond "no crash, no sanitizer report", it checks and traps unless:
//   * the unchanged frame decodes (the encoder's output is accepted);
//   * a refused frame leaves `dense` (DecodeAccumulate) and `out`
//     (DecodeAverage) bit for bit as they were ("nothing changes unless
//     the whole frame is valid", codec.h);
//   * DecodeAverage over valid frames followed by the changed one names
//     the changed one (the last) as the bad frame when it refuses;
//   * an accepted average equals DecodeAccumulate of each frame in order
//     into zeros, then divided (the contract of codec.h), bit for bit
//     (any NaN as any other);
//   * nothing reads or writes past the frames and outputs it is given
//     (each ends at a page it may not touch: the kernels are built
//     without the sanitizers, tools/fuzz.sh).
// The same input's bytes are also read as floats, a gradient and a
// residual of any values (NaN, infinities, denormals, values that
// overflow fp16) for Encode with error feedback, which must hold the
// contract of codec.h: the frame decodes; EncodeStats counts the
// non-finite acc = g + e_old; if there were none, the new residual is
// fl(acc - decoded) bit for bit (0 where that is not finite; ±0 alike),
// and if there were, the frame decodes as NaN everywhere; the residual
// is always finite.
// Build and run: tools/fuzz.sh SECONDS.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/wire_format.h"
#include "tests/clone_test_inputs.h"

namespace {

using gradwire::Codec;
using gradwire::CodecScratch;
using gradwire::CompressionSpec;
using gradwire::kernels::cpu::GuardedBytes;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Every codec and the settings that change its frames' layout.
constexpr const char* kSpecs[] = {
    "none",
    "fp16",
    "bf16",
    "topk:ratio=0.1",
    "topk:ratio=0.1,indices=raw",
    "topk:ratio=0.05,values=fp16",
    "topk:ratio=0.3,values=bf16,indices=raw",
    "approx_topk:ratio=0.1",
    "approx_topk:ratio=0.02,values=bf16",
    "randomk:ratio=0.1,seed=7",
    "randomk:ratio=0.2,values=fp16,seed=3",
    "qsgd:bits=1,bucket=64",
    "qsgd:bits=2,bucket=512",
    "qsgd:bits=3,bucket=40",
    "qsgd:bits=4,bucket=512",
    "qsgd:bits=5,bucket=17",
    "qsgd:bits=6,bucket=512",
    "qsgd:bits=7,bucket=8",
    "qsgd:bits=8,bucket=100",
    "sign:bucket=512",
    "sign:bucket=33",
};
constexpr size_t kSpecCount = sizeof(kSpecs) / sizeof(kSpecs[0]);

const Codec& CodecFor(size_t i) {
  static std::unique_ptr<Codec>* codecs = [] {
    auto* all = new std::unique_ptr<Codec>[kSpecCount];
    for (size_t j = 0; j < kSpecCount; ++j) {
      absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(kSpecs[j]);
      Check(spec.ok());
      absl::StatusOr<std::unique_ptr<Codec>> codec = gradwire::MakeCodec(*spec);
      Check(codec.ok());
      all[j] = *std::move(codec);
    }
    return all;
  }();
  return *codecs[i];
}

constexpr uint64_t kMaxN = 4096;

// The first n of kMaxN values from `seed`, finite (clone_test_inputs.h's
// Finite: gradient-like) or `mixed` (its Mixed: every special class).
// Each seed's values are drawn once and kept (about 12 MB at most): drawn
// anew for every input they took most of the fuzzer's time.
std::vector<float> Seeded(uint64_t n, uint32_t seed, bool mixed = false) {
  static auto* drawn = new std::map<std::pair<uint32_t, bool>, std::vector<float>>;
  std::vector<float>& v = (*drawn)[{seed, mixed}];
  if (v.empty()) {
    std::mt19937_64 rng(seed);
    v = gradwire::kernels::cpu::Input(mixed, kMaxN, rng);
  }
  return std::vector<float>(v.begin(), v.begin() + n);
}

std::vector<uint8_t> Encoded(const Codec& codec, const std::vector<float>& g, uint64_t step) {
  std::vector<uint8_t> frame(codec.MaxEncodedBytes(g.size()));
  absl::StatusOr<gradwire::EncodeStats> stats = codec.Encode(g, step, {}, absl::MakeSpan(frame));
  Check(stats.ok());
  frame.resize(stats->frame_bytes);
  return frame;
}

// The checksum over everything before it, as the writer stores it.
void Reseal(std::vector<uint8_t>& frame) {
  if (frame.size() < gradwire::kFrameHeaderBytes + gradwire::kFrameChecksumBytes) return;
  const size_t body = frame.size() - gradwire::kFrameChecksumBytes;
  gradwire::EncodeFixed64(&frame[body], gradwire::Checksum64(frame.data(), body));
}

// Bit for bit, NaN payloads included (a refused call changes nothing).
bool SameBits(absl::Span<const float> a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Encode with error feedback of `bytes` read as floats, a gradient and
// then a residual (the seeded ones where there are no bytes), against the
// contract of codec.h.
void CheckEncode(const Codec& codec, uint64_t n, uint32_t seed, const uint8_t* bytes, size_t size) {
  std::vector<float> grad = Seeded(n, seed), residual = Seeded(n, seed + 100);
  for (float& r : residual) r *= 0.25f;
  // The input's floats, repeated over both where it holds fewer: runs of
  // one pattern (ties, NaNs or infinities throughout).
  const size_t floats = size / 4;
  for (size_t i = 0; floats > 0 && i < 2 * n; ++i) {
    float f;
    std::memcpy(&f, bytes + 4 * (i % floats), 4);
    (i < n ? grad[i] : residual[i - n]) = f;
  }
  const bool ef = codec.spec().UsesErrorFeedback();
  std::vector<float> acc(n);
  uint64_t nonfinite = 0;
  for (uint64_t i = 0; i < n; ++i) {
    acc[i] = ef ? grad[i] + residual[i] : grad[i];
    nonfinite += std::isfinite(acc[i]) ? 0 : 1;
  }
  if (!ef) residual.clear();
  std::vector<uint8_t> frame(codec.MaxEncodedBytes(n));
  absl::StatusOr<gradwire::EncodeStats> stats =
      codec.Encode(grad, 7, absl::MakeSpan(residual), absl::MakeSpan(frame));
  Check(stats.ok());
  Check(stats->nonfinite == nonfinite);
  frame.resize(stats->frame_bytes);
  std::vector<float> decoded(n, 0.0f);
  Check(codec.DecodeAccumulate(frame, absl::MakeSpan(decoded)).ok());
  for (uint64_t i = 0; i < n; ++i) {
    if (nonfinite > 0) Check(std::isnan(decoded[i]));
    if (!ef) continue;
    Check(std::isfinite(residual[i]));
    if (nonfinite > 0) continue;
    const float r = acc[i] - decoded[i];
    const float want = std::isfinite(r) ? r : 0.0f;
    // decoded is the frame's value added to +0, which loses a -0 (the
    // frame's value of acc = -0): zeros of either sign are one here.
    Check(std::memcmp(&residual[i], &want, sizeof(float)) == 0 ||
          (residual[i] == 0.0f && want == 0.0f));
  }
}

// Input: spec (1 byte), n (2), gradient seed (1), frames before the
// changed one (1: 0..3), mode (1: bit 0 replace the frame, bit 1 keep the
// stale checksum), length change (1, signed; bytes added are the mode
// byte), then the replacement frame (bit 0) or edits (offset u16, byte).
constexpr size_t kFixedBytes = 7;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kFixedBytes) return 0;
  const Codec& codec = CodecFor(data[0] % kSpecCount);
  const uint64_t n =
      1 + (static_cast<uint64_t>(data[1]) | static_cast<uint64_t>(data[2]) << 8) % kMaxN;
  const uint32_t seed = data[3];
  const size_t valid_frames = data[4] % 4;
  const uint8_t mode = data[5];
  const int length_change = static_cast<int8_t>(data[6]);
  const uint8_t* rest = data + kFixedBytes;
  const size_t rest_size = size - kFixedBytes;
  const uint64_t step = 3;
  CheckEncode(codec, n, seed, rest, rest_size);

  std::vector<std::vector<uint8_t>> frames;
  for (size_t r = 0; r <= valid_frames; ++r) {
    frames.push_back(Encoded(codec, Seeded(n, seed + static_cast<uint32_t>(r)), step));
  }
  // The encoder's own frames decode.
  {
    std::vector<float> dense(n, 0.0f);
    Check(codec.DecodeAccumulate(frames.back(), absl::MakeSpan(dense)).ok());
  }
  std::vector<uint8_t>& changed = frames.back();
  if (mode & 1) {
    changed.assign(rest, rest + rest_size);
  } else {
    for (size_t e = 0; e + 3 <= rest_size; e += 3) {
      if (changed.empty()) break;
      const size_t at =
          (static_cast<size_t>(rest[e]) | static_cast<size_t>(rest[e + 1]) << 8) % changed.size();
      changed[at] = rest[e + 2];
    }
  }
  if (length_change < 0) {
    changed.resize(changed.size() - std::min<size_t>(changed.size(), -length_change));
  } else if (length_change > 0) {
    changed.resize(changed.size() + static_cast<size_t>(length_change), mode);
  }
  if (!(mode & 2)) Reseal(changed);

  // Every frame and output ends flush against a page the process may not
  // touch: the kernels run outside the sanitizers (tools/fuzz.sh), and a
  // read or write past the end of what they were given faults there.
  std::vector<std::unique_ptr<GuardedBytes>> guarded;
  std::vector<absl::Span<const uint8_t>> views;
  for (const auto& f : frames) {
    guarded.push_back(std::make_unique<GuardedBytes>(f.size()));
    if (!f.empty()) std::memcpy(guarded.back()->data(), f.data(), f.size());
    views.push_back(absl::MakeConstSpan(guarded.back()->data(), f.size()));
  }
  // What dense and out hold before each call: any values, NaNs with
  // payloads too, which a refused call must leave as they are.
  const std::vector<float> before = Seeded(n, seed, /*mixed=*/true);
  GuardedBytes dense_bytes(4 * n), out_bytes(4 * n);
  const absl::Span<float> dense(dense_bytes.floats(), n), out(out_bytes.floats(), n);

  CodecScratch scratch;
  // DecodeAccumulate: all or nothing, into a dense of any content.
  std::copy(before.begin(), before.end(), dense.begin());
  const absl::Status one = codec.DecodeAccumulate(views.back(), dense, &scratch);
  if (!one.ok()) Check(SameBits(dense, before));

  // DecodeAverage: valid frames, then the changed one.
  const float divisor = static_cast<float>(frames.size());
  std::copy(before.begin(), before.end(), out.begin());
  size_t bad = views.size() + 1;
  const absl::Status avg = codec.DecodeAverage(views, divisor, out, &scratch, &bad);
  if (!avg.ok()) {
    Check(SameBits(out, before));
    Check(bad == views.size() - 1);
    return 0;
  }
  // Accepted: the contract's steps give the same bits.
  std::vector<float> steps(n, 0.0f);
  for (const auto& f : views) Check(codec.DecodeAccumulate(f, absl::MakeSpan(steps)).ok());
  for (float& v : steps) v /= divisor;
  Check(gradwire::kernels::cpu::AsBits(std::vector<float>(out.begin(), out.end())) ==
        gradwire::kernels::cpu::AsBits(steps));  // any NaN as one: a payload is no part of it
  return 0;
}
