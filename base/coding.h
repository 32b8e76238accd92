// Byte coding: the one place gradwire turns integers into little-endian
// bytes and back, in the style of LevelDB's util/coding.h.
//
// Every format gradwire writes (codec frames, frame MAC trailers, error-
// feedback checkpoints, communicator checkpoints, cache shards and disk
// entries) is built from these primitives, so there is one definition of
// "little endian", one varint grammar and one bounded reader.
//
//   * EncodeFixedN / DecodeFixedN: N-byte little-endian at a raw pointer.
//     The caller has checked the bounds (use ByteReader where it has not).
//   * PutFixedN / PutVarint32 / PutBytes: append to a std::string.
//   * ByteReader: reads a bounded span front to back. A read that would pass
//     the end fails, consumes nothing and leaves the reader at its position;
//     nothing is ever read past the limit. Errors name the field being read
//     and the byte offset, prefixed by the reader's context ("shard: ...").
//
// Varints are LEB128 (7 bits per byte, low group first, high bit = more),
// at most 5 bytes for a uint32_t. Decoding is strict: a non-minimal encoding
// (a final byte of 0x00 after the first), a fifth byte above 0x0f or a
// truncated varint is refused, so every value has exactly one encoding.
#ifndef GRADWIRE_BASE_CODING_H_
#define GRADWIRE_BASE_CODING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire {

// --- Fixed width, at a pointer (bounds checked by the caller) ---

inline void EncodeFixed16(uint8_t* dst, uint16_t v) {
  dst[0] = static_cast<uint8_t>(v);
  dst[1] = static_cast<uint8_t>(v >> 8);
}
inline void EncodeFixed32(uint8_t* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void EncodeFixed64(uint8_t* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t DecodeFixed16(const uint8_t* src) {
  return static_cast<uint16_t>(src[0] | (uint16_t{src[1]} << 8));
}
// One load each (GCC does not merge the byte-by-byte form into one: a
// loop over DecodeFixed64 measured twice as slow as memcpy's load).
inline uint32_t DecodeFixed32(const uint8_t* src) {
  uint32_t v;
  std::memcpy(&v, src, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}
inline uint64_t DecodeFixed64(const uint8_t* src) {
  uint64_t v;
  std::memcpy(&v, src, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

// Width-generic forms, for code that walks a table of fields (a header
// listed once, read and written through the same list): T is an unsigned
// integer of 1, 2, 4 or 8 bytes, or an enum whose underlying type is one.
template <typename T>
void EncodeFixed(uint8_t* dst, T v) {
  if constexpr (std::is_enum_v<T>) {
    EncodeFixed(dst, static_cast<std::underlying_type_t<T>>(v));
  } else {
    static_assert(std::is_unsigned_v<T>, "EncodeFixed: unsigned integers and enums only");
    if constexpr (sizeof(T) == 1) {
      dst[0] = v;
    } else if constexpr (sizeof(T) == 2) {
      EncodeFixed16(dst, v);
    } else if constexpr (sizeof(T) == 4) {
      EncodeFixed32(dst, v);
    } else {
      static_assert(sizeof(T) == 8, "EncodeFixed: 1, 2, 4 or 8 bytes");
      EncodeFixed64(dst, v);
    }
  }
}
template <typename T>
T DecodeFixed(const uint8_t* src) {
  if constexpr (std::is_enum_v<T>) {
    // Any byte pattern is a value of an enum with a fixed underlying type;
    // range checks are the caller's.
    return static_cast<T>(DecodeFixed<std::underlying_type_t<T>>(src));
  } else {
    static_assert(std::is_unsigned_v<T>, "DecodeFixed: unsigned integers and enums only");
    if constexpr (sizeof(T) == 1) {
      return src[0];
    } else if constexpr (sizeof(T) == 2) {
      return DecodeFixed16(src);
    } else if constexpr (sizeof(T) == 4) {
      return DecodeFixed32(src);
    } else {
      static_assert(sizeof(T) == 8, "DecodeFixed: 1, 2, 4 or 8 bytes");
      return DecodeFixed64(src);
    }
  }
}

// char-pointer overloads for formats kept in std::string.
inline void EncodeFixed32(char* dst, uint32_t v) {
  EncodeFixed32(reinterpret_cast<uint8_t*>(dst), v);
}
inline void EncodeFixed64(char* dst, uint64_t v) {
  EncodeFixed64(reinterpret_cast<uint8_t*>(dst), v);
}
inline uint32_t DecodeFixed32(const char* src) {
  return DecodeFixed32(reinterpret_cast<const uint8_t*>(src));
}
inline uint64_t DecodeFixed64(const char* src) {
  return DecodeFixed64(reinterpret_cast<const uint8_t*>(src));
}

// --- Appending to a string ---

void PutFixed16(std::string* dst, uint16_t v);
void PutFixed32(std::string* dst, uint32_t v);
void PutFixed64(std::string* dst, uint64_t v);
void PutBytes(std::string* dst, absl::string_view bytes);
// u32 length, then the bytes. The caller keeps bytes.size() < 2^32.
void PutLengthPrefixed32(std::string* dst, absl::string_view bytes);

// --- Varints ---

constexpr size_t kMaxVarint32Bytes = 5;

// Bytes PutVarint32 would write for v (1..5).
size_t Varint32Length(uint32_t v);
void PutVarint32(std::string* dst, uint32_t v);
// Writes v at out[*pos]; false (nothing written) if it does not fit.
bool EncodeVarint32(absl::Span<uint8_t> out, size_t* pos, uint32_t v);

// Strict decode of the varint at in[*pos] (see the file comment). On
// success advances *pos. Errors: kInvalidArgument naming `what`, the byte
// offset and the rule broken; *pos and *v unchanged.
absl::Status DecodeVarint32(absl::Span<const uint8_t> in, size_t* pos, uint32_t* v,
                            absl::string_view what);

// The same grammar for hot loops, LevelDB style: decodes the varint at
// [p, limit) into *v and returns the byte after it, or nullptr if it is
// truncated, overlong or above 32 bits (call DecodeVarint32 at the same
// place for the error). One- and two-byte values are decoded inline.
const uint8_t* GetVarint32PtrFallback(const uint8_t* p, const uint8_t* limit, uint32_t* v);
inline const uint8_t* GetVarint32Ptr(const uint8_t* p, const uint8_t* limit, uint32_t* v) {
  if (p < limit && p[0] < 0x80) {
    *v = p[0];
    return p + 1;
  }
  // A second byte of 0x00 would be overlong: leave it to the fallback.
  if (limit - p >= 2 && p[1] < 0x80 && p[1] != 0) {
    *v = (p[0] & 0x7fu) | uint32_t{p[1]} << 7;
    return p + 2;
  }
  return GetVarint32PtrFallback(p, limit, v);
}

// --- Bounded reading ---

class ByteReader {
 public:
  // `context` prefixes every error ("error-feedback state", "shard", ...);
  // it must outlive the reader (a literal, typically).
  ByteReader(absl::Span<const uint8_t> in, absl::string_view context);
  ByteReader(absl::string_view in, absl::string_view context);

  // Each reads one field or fails with kInvalidArgument (nothing consumed).
  absl::Status ReadFixed16(absl::string_view what, uint16_t* v);
  absl::Status ReadFixed32(absl::string_view what, uint32_t* v);
  absl::Status ReadFixed64(absl::string_view what, uint64_t* v);
  absl::Status ReadVarint32(absl::string_view what, uint32_t* v);
  // n bytes as a view into the input. n may be any value: a length read
  // from the input is checked here, never used to allocate first.
  absl::Status ReadBytes(absl::string_view what, uint64_t n, absl::string_view* v);
  // u32 length, then that many bytes.
  absl::Status ReadLengthPrefixed32(absl::string_view what, absl::string_view* v);
  absl::Status Skip(absl::string_view what, uint64_t n);

  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  bool done() const { return pos_ == size_; }
  // kInvalidArgument unless every byte was read ("N trailing bytes").
  absl::Status ExpectDone() const;
  // An error at the current position, for checks the caller makes on a
  // value it has read ("bad version 7"): "<context>: <message> at byte P".
  absl::Status Error(absl::string_view message) const;

 private:
  absl::Status Truncated(absl::string_view what, uint64_t need) const;

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  absl::string_view context_;
};

}  // namespace gradwire

#endif  // GRADWIRE_BASE_CODING_H_
