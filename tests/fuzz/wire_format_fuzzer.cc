// libFuzzer target for the frame parser and the index decoders.
//
// Each input is tried twice: as received, and with its checksum recomputed
// (when long enough). Without the second pass almost every mutation dies at
// the checksum and the field checks and DecodeIndices behind it are barely
// explored. Beyond "no crash, no sanitizer report", it checks two
// properties and traps if they fail:
//   * a frame that parses re-encodes, through StartFrame/SealFrame, to the
//     same bytes (the parser accepts nothing the writer cannot produce);
//   * indices that decode re-encode to the same bytes (encodings are
//     canonical, so one index list has one wire form).
// The same input also goes to FrameAuthenticator::Verify (hostile
// trailers), and is signed and verified as a frame: the verified view must
// be the input, and any one changed byte must be refused. And it is read as
// a run of base/ varints: the fast and the explaining decoder must agree,
// and what they accept must re-encode to the same bytes.
// Build and run: tools/fuzz.sh SECONDS.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/codec/wire_format.h"

namespace {

using gradwire::DecodeIndices;
using gradwire::EncodeIndices;
using gradwire::FrameLimits;
using gradwire::IndexEncoding;
using gradwire::ParsedFrame;

// Small caps so that huge declared lengths are refused by the caps, as a
// receiver configured for its job would.
FrameLimits FuzzLimits() {
  FrameLimits limits;
  limits.max_dense_length = uint64_t{1} << 32;
  limits.max_frame_bytes = 1 << 20;
  return limits;
}

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void FuzzIndices(IndexEncoding encoding, absl::Span<const uint8_t> in, uint64_t dense_length,
                 uint64_t count) {
  // Every encoded index takes at least one byte, so more outputs than input
  // bytes can only be refused; cap the buffer there rather than allocate
  // what a hostile count asks for.
  const size_t n = static_cast<size_t>(count < in.size() + 1 ? count : in.size() + 1);
  std::vector<uint32_t> out(n);
  if (!DecodeIndices(encoding, in, dense_length, absl::MakeSpan(out)).ok()) return;
  for (size_t i = 1; i < out.size(); ++i) Check(out[i] > out[i - 1]);
  for (uint32_t v : out) Check(v < dense_length);
  std::vector<uint8_t> again(gradwire::MaxIndexBytes(encoding, out.size()));
  auto written = EncodeIndices(encoding, out, absl::MakeSpan(again));
  Check(written.ok());
  Check(*written == in.size());
  Check(in.empty() || std::memcmp(again.data(), in.data(), in.size()) == 0);
}

void FuzzFrame(absl::Span<const uint8_t> frame) {
  auto parsed = gradwire::ParseFrame(frame, FuzzLimits());
  if (!parsed.ok()) return;
  const gradwire::FrameHeader& h = parsed->header;
  const gradwire::FrameSections& s = parsed->sections;

  // Writer round trip.
  Check(gradwire::FrameBytes(h) == frame.size());
  std::vector<uint8_t> rebuilt(frame.size());
  auto sections = gradwire::StartFrame(h, absl::MakeSpan(rebuilt));
  Check(sections.ok());
  if (!s.indices.empty()) std::memcpy(sections->indices.data(), s.indices.data(), s.indices.size());
  if (!s.scales.empty()) std::memcpy(sections->scales.data(), s.scales.data(), s.scales.size());
  if (!s.values.empty()) std::memcpy(sections->values.data(), s.values.data(), s.values.size());
  auto sealed = gradwire::SealFrame(absl::MakeSpan(rebuilt));
  Check(sealed.ok() && *sealed == frame.size());
  Check(std::memcmp(rebuilt.data(), frame.data(), frame.size()) == 0);

  // The frame's own encoding with its element count, as a top-k decoder
  // would call it, then the other encodings over the same bytes to reach
  // more decoder states.
  FuzzIndices(h.index_encoding, s.indices, h.dense_length, h.element_count);
  FuzzIndices(IndexEncoding::kRawU32, s.values, h.dense_length, s.values.size() / 4);
  FuzzIndices(IndexEncoding::kDeltaVarint, s.values, h.dense_length, h.element_count);
}

void FuzzVarints(absl::Span<const uint8_t> in) {
  size_t pos = 0;
  while (pos < in.size()) {
    uint32_t fast = 0, slow = 0;
    const uint8_t* next = gradwire::GetVarint32Ptr(in.data() + pos, in.data() + in.size(), &fast);
    size_t after = pos;
    const bool ok = gradwire::DecodeVarint32(in, &after, &slow, "fuzz").ok();
    Check(ok == (next != nullptr));
    if (!ok) {
      Check(after == pos);
      ++pos;  // resynchronize one byte on
      continue;
    }
    Check(fast == slow && after == static_cast<size_t>(next - in.data()));
    std::string again;
    gradwire::PutVarint32(&again, fast);
    Check(again.size() == after - pos &&
          std::memcmp(again.data(), in.data() + pos, again.size()) == 0);
    pos = after;
  }
}

const gradwire::FrameAuthenticator& Authenticator() {
  static const gradwire::FrameAuthenticator* auth = [] {
    auto secret = gradwire::JobSecret::FromValue("fuzzing secret 0123456789", "fuzzer");
    Check(secret.ok());
    auto a = gradwire::FrameAuthenticator::Create(*secret, "fuzz-job", 16);
    Check(a.ok());
    return new gradwire::FrameAuthenticator(std::move(*a));
  }();
  return *auth;
}

void FuzzAuth(absl::Span<const uint8_t> data) {
  const gradwire::FrameAuthenticator& auth = Authenticator();
  gradwire::FrameOrigin origin;
  origin.sender_rank = 3;
  origin.step = 11;
  origin.bucket = 1;
  // Arbitrary bytes as a received authenticated frame: with a 2^-128
  // chance of a valid tag, acceptance would mean a broken check.
  Check(!auth.Verify(data, origin).ok());

  std::vector<uint8_t> buf(data.begin(), data.end());
  buf.resize(data.size() + auth.trailer_bytes());
  auto len = auth.Sign(absl::MakeSpan(buf), data.size(), origin);
  Check(len.ok() && *len == buf.size());
  auto verified = auth.Verify(buf, origin);
  Check(verified.ok() && verified->size() == data.size() &&
        (data.empty() || std::memcmp(verified->data(), data.data(), data.size()) == 0));
  // Change one byte chosen by the input; the result must be refused.
  const size_t at = data.empty() ? 0 : data[0] * 257u % buf.size();
  buf[at] ^= data.empty() ? 1 : (data[data.size() - 1] | 1);
  Check(!auth.Verify(buf, origin).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzFrame(absl::MakeConstSpan(data, size));
  FuzzAuth(absl::MakeConstSpan(data, size));
  FuzzVarints(absl::MakeConstSpan(data, size));
  if (size >= gradwire::kFrameHeaderBytes + gradwire::kFrameChecksumBytes) {
    std::vector<uint8_t> resealed(data, data + size);
    const size_t covered = size - gradwire::kFrameChecksumBytes;
    gradwire::EncodeFixed64(&resealed[covered], gradwire::Checksum64(resealed.data(), covered));
    FuzzFrame(resealed);
  }
  return 0;
}
