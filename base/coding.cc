#include "gradwire/base/coding.h"

#include "absl/strings/str_cat.h"

namespace gradwire {

void PutFixed16(std::string* dst, uint16_t v) {
  uint8_t b[2];
  EncodeFixed16(b, v);
  dst->append(reinterpret_cast<const char*>(b), sizeof(b));
}

void PutFixed32(std::string* dst, uint32_t v) {
  uint8_t b[4];
  EncodeFixed32(b, v);
  dst->append(reinterpret_cast<const char*>(b), sizeof(b));
}

void PutFixed64(std::string* dst, uint64_t v) {
  uint8_t b[8];
  EncodeFixed64(b, v);
  dst->append(reinterpret_cast<const char*>(b), sizeof(b));
}

void PutBytes(std::string* dst, absl::string_view bytes) {
  dst->append(bytes.data(), bytes.size());
}

void PutLengthPrefixed32(std::string* dst, absl::string_view bytes) {
  PutFixed32(dst, static_cast<uint32_t>(bytes.size()));
  PutBytes(dst, bytes);
}

size_t Varint32Length(uint32_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutVarint32(std::string* dst, uint32_t v) {
  uint8_t b[kMaxVarint32Bytes];
  size_t pos = 0;
  EncodeVarint32(absl::MakeSpan(b), &pos, v);
  dst->append(reinterpret_cast<const char*>(b), pos);
}

bool EncodeVarint32(absl::Span<uint8_t> out, size_t* pos, uint32_t v) {
  if (out.size() < *pos || out.size() - *pos < Varint32Length(v)) return false;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    out[(*pos)++] = byte;
  } while (v != 0);
  return true;
}

namespace {

// The varint grammar, once: what can go wrong with the varint at p.
enum class VarintError { kNone, kTruncated, kTooLarge, kOverlong };

// Decodes the varint at [p, limit), p < limit; on success sets *v and
// *length.
VarintError ParseVarint32(const uint8_t* p, const uint8_t* limit, uint32_t* v, size_t* length,
                          uint8_t* bad_byte) {
  const size_t avail = static_cast<size_t>(limit - p);  // p < limit
  uint32_t value = 0;
  for (size_t i = 0; i < kMaxVarint32Bytes; ++i) {
    if (i >= avail) return VarintError::kTruncated;
    const uint8_t byte = p[i];
    if (i == kMaxVarint32Bytes - 1 && (byte & 0xf0) != 0) {
      // Fifth byte: 4 payload bits remain below 2^32, and no continuation.
      *bad_byte = byte;
      return VarintError::kTooLarge;
    }
    value |= uint32_t{byte & 0x7fu} << (7 * i);
    if ((byte & 0x80) == 0) {
      if (byte == 0 && i > 0) {
        *length = i + 1;
        return VarintError::kOverlong;
      }
      *v = value;
      *length = i + 1;
      return VarintError::kNone;
    }
  }
  return VarintError::kTooLarge;  // not reached: the fifth byte decides above
}

}  // namespace

const uint8_t* GetVarint32PtrFallback(const uint8_t* p, const uint8_t* limit, uint32_t* v) {
  size_t length = 0;
  uint8_t bad_byte = 0;
  if (p >= limit) return nullptr;
  if (ParseVarint32(p, limit, v, &length, &bad_byte) != VarintError::kNone) return nullptr;
  return p + length;
}

absl::Status DecodeVarint32(absl::Span<const uint8_t> in, size_t* pos, uint32_t* v,
                            absl::string_view what) {
  const size_t start = *pos;
  uint32_t value = 0;
  size_t length = 0;
  uint8_t bad_byte = 0;
  const VarintError error =
      start >= in.size()
          ? VarintError::kTruncated
          : ParseVarint32(in.data() + start, in.data() + in.size(), &value, &length, &bad_byte);
  switch (error) {
    case VarintError::kNone:
      *pos = start + length;
      *v = value;
      return absl::OkStatus();
    case VarintError::kTruncated:
      return absl::InvalidArgumentError(absl::StrCat(
          what, " at byte ", start, " runs past the end of the ", in.size(), "-byte input"));
    case VarintError::kTooLarge:
      return absl::InvalidArgumentError(absl::StrCat(
          what, " at byte ", start, " exceeds 32 bits (fifth byte 0x", absl::Hex(bad_byte), ")"));
    case VarintError::kOverlong:
      return absl::InvalidArgumentError(
          absl::StrCat(what, " at byte ", start, " is overlong (", length,
                       " bytes ending in 0x00; encodings must be minimal)"));
  }
  return absl::InternalError("unreachable: varint error");
}

ByteReader::ByteReader(absl::Span<const uint8_t> in, absl::string_view context)
    : data_(in.data()), size_(in.size()), context_(context) {}

ByteReader::ByteReader(absl::string_view in, absl::string_view context)
    : data_(reinterpret_cast<const uint8_t*>(in.data())), size_(in.size()), context_(context) {}

absl::Status ByteReader::Truncated(absl::string_view what, uint64_t need) const {
  return absl::InvalidArgumentError(absl::StrCat(context_, ": truncated reading ", what,
                                                 " at byte ", pos_, " (", need, " bytes needed, ",
                                                 remaining(), " left of ", size_, ")"));
}

absl::Status ByteReader::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(context_, ": ", message, " at byte ", pos_));
}

absl::Status ByteReader::ReadFixed16(absl::string_view what, uint16_t* v) {
  if (remaining() < 2) return Truncated(what, 2);
  *v = DecodeFixed16(data_ + pos_);
  pos_ += 2;
  return absl::OkStatus();
}

absl::Status ByteReader::ReadFixed32(absl::string_view what, uint32_t* v) {
  if (remaining() < 4) return Truncated(what, 4);
  *v = DecodeFixed32(data_ + pos_);
  pos_ += 4;
  return absl::OkStatus();
}

absl::Status ByteReader::ReadFixed64(absl::string_view what, uint64_t* v) {
  if (remaining() < 8) return Truncated(what, 8);
  *v = DecodeFixed64(data_ + pos_);
  pos_ += 8;
  return absl::OkStatus();
}

absl::Status ByteReader::ReadVarint32(absl::string_view what, uint32_t* v) {
  const uint8_t* next = GetVarint32Ptr(data_ + pos_, data_ + size_, v);
  if (next != nullptr) {
    pos_ = static_cast<size_t>(next - data_);
    return absl::OkStatus();
  }
  // Only a malformed varint pays for the message.
  return DecodeVarint32(absl::MakeConstSpan(data_, size_), &pos_, v,
                        absl::StrCat(context_, ": ", what));
}

absl::Status ByteReader::ReadBytes(absl::string_view what, uint64_t n, absl::string_view* v) {
  if (remaining() < n) return Truncated(what, n);
  *v = absl::string_view(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return absl::OkStatus();
}

absl::Status ByteReader::ReadLengthPrefixed32(absl::string_view what, absl::string_view* v) {
  const size_t start = pos_;
  uint32_t n = 0;
  if (absl::Status s = ReadFixed32(what, &n); !s.ok()) return s;
  if (absl::Status s = ReadBytes(what, n, v); !s.ok()) {
    pos_ = start;  // a failed read consumes nothing
    return s;
  }
  return absl::OkStatus();
}

absl::Status ByteReader::Skip(absl::string_view what, uint64_t n) {
  absl::string_view ignored;
  return ReadBytes(what, n, &ignored);
}

absl::Status ByteReader::ExpectDone() const {
  if (done()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      context_, ": ", remaining(), " trailing bytes after byte ", pos_, " of ", size_));
}

}  // namespace gradwire
