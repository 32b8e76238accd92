// QSGD's code stream on the CPU (quantize.cc): codes staged one a byte
// and packed to the wire's layout (quantize.h), and read back the same way.
#ifndef GRADWIRE_KERNELS_CPU_QSGD_PACKING_H_
#define GRADWIRE_KERNELS_CPU_QSGD_PACKING_H_

#include <stdint.h>
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace qsgd_packing {

// Elements coded per step: their hashes, codes and packed bytes are staged
// on the stack, so each element loop runs straight through (and
// vectorizes) and bits are packed eight codes at a time.
constexpr uint64_t kBlock = 512;

// Eight codes of `bits` (1..8) bits, one per byte of w (little endian),
// packed into the low 8 * bits bits: pairs, then quads, then the halves.
GRADWIRE_CPU_INLINE uint64_t Compact(uint64_t w, uint32_t bits) {
  w = (w & 0x00ff00ff00ff00ffull) | ((w & 0xff00ff00ff00ff00ull) >> (8 - bits));
  w = (w & 0x0000ffff0000ffffull) | ((w & 0xffff0000ffff0000ull) >> (16 - 2 * bits));
  return (w & 0xffffffffull) | ((w >> 32) << (4 * bits));
}

// Compact's inverse: the low 8 * bits bits of w as eight codes, one a byte.
GRADWIRE_CPU_INLINE uint64_t Expand(uint64_t w, uint32_t bits) {
  const uint64_t m4 = (uint64_t{1} << (4 * bits)) - 1;
  w = (w & m4) | (((w >> (4 * bits)) & m4) << 32);
  const uint64_t m2 = ((uint64_t{1} << (2 * bits)) - 1) * 0x0000000100000001ull;
  w = (w & m2) | (((w >> (2 * bits)) & m2) << 16);
  const uint64_t m1 = ((uint64_t{1} << bits) - 1) * 0x0001000100010001ull;
  return (w & m1) | (((w >> bits) & m1) << 8);
}

// Packing when codes do not cross bytes (bits 1, 2, 4): byte j holds the
// 8/bits codes from 8/bits * j on, lowest first. Each byte is gathered
// from, or spread to, its codes (one a byte, little endian) with shifts
// and masks on one word, in loops over bytes that vectorize.
template <uint32_t kBits>
GRADWIRE_CPU_INLINE void PackBytes(const uint8_t* codes, uint64_t bytes, uint8_t* out) {
  for (uint64_t j = 0; j < bytes; ++j) {
    uint64_t b;
    if (kBits == 4) {
      const uint32_t x = LoadLe<uint16_t>(codes + 2 * j);
      b = x | x >> 4;
    } else if (kBits == 2) {
      const uint32_t x = LoadLe<uint32_t>(codes + 4 * j);
      b = x | x >> 6 | x >> 12 | x >> 18;
    } else {
      // b_e at bit 56 + e of the product, the rest below bit 56 (no carries)
      // or above bit 63.
      b = (LoadLe<uint64_t>(codes + 8 * j) * 0x0102040810204080ull) >> 56;
    }
    out[j] = static_cast<uint8_t>(b);
  }
}

template <uint32_t kBits>
GRADWIRE_CPU_INLINE void UnpackBytes(const uint8_t* in, uint64_t bytes, uint8_t* codes) {
  for (uint64_t j = 0; j < bytes; ++j) {
    const uint64_t b = in[j];
    if (kBits == 4) {
      StoreLe<uint16_t>(codes + 2 * j, static_cast<uint16_t>((b | b << 4) & 0x0f0f));
    } else if (kBits == 2) {
      StoreLe<uint32_t>(codes + 4 * j,
                        static_cast<uint32_t>((b | b << 6 | b << 12 | b << 18) & 0x03030303));
    } else {
      uint64_t x = (b | b << 28) & 0x0000000f0000000full;
      x = (x | x << 14) & 0x0003000300030003ull;
      StoreLe<uint64_t>(codes + 8 * j, (x | x << 7) & 0x0101010101010101ull);
    }
  }
}

// Appends codes (one a byte) to the packed stream, eight at a time; the
// bytes come out in order and the last one's unused bits are zero, so the
// output needs no zeroing pass. (Its members are inlined into each clone.)
//
// A caller built for a wider ISA may pass `six`, a packer of whole runs of
// groups at 6 bits (QSGD's 6-bit codes, which straddle bytes): given g
// groups it packs a first run of them to out (6 bytes each, the same bytes
// as Compact; as many as its steps take whole) and returns how many.
using SixBitPacker = uint64_t (*)(const uint8_t* codes, uint64_t groups, uint8_t* out);

class CodePacker {
 public:
  CodePacker(uint8_t* out, uint32_t bits, SixBitPacker six = nullptr)
      : out_(out), bits_(bits), six_(bits == 6 ? six : nullptr) {}

  // Where the next count <= kBlock codes go; then call Commit(count).
  GRADWIRE_CPU_INLINE uint8_t* Slots() { return codes_ + pending_; }

  GRADWIRE_CPU_INLINE void Commit(uint64_t count) {
    pending_ += count;
    const uint64_t groups = pending_ / 8;
    Pack(groups);
    pending_ -= 8 * groups;
    memmove(codes_, codes_ + 8 * groups, pending_);
  }

  GRADWIRE_CPU_INLINE void Finish() {
    if (pending_ == 0) return;
    memset(codes_ + pending_, 0, 8 - pending_);
    uint8_t word[8];
    StoreLe<uint64_t>(word, Compact(LoadLe<uint64_t>(codes_), bits_));
    memcpy(out_, word, (pending_ * bits_ + 7) / 8);
    pending_ = 0;
  }

 private:
  GRADWIRE_CPU_INLINE void Pack(uint64_t groups) {
    switch (bits_) {
      case 1:
        PackBytes<1>(codes_, groups, out_);
        break;
      case 2:
        PackBytes<2>(codes_, 2 * groups, out_);
        break;
      case 4:
        PackBytes<4>(codes_, 4 * groups, out_);
        break;
      case 8:
        memcpy(out_, codes_, 8 * groups);
        break;
      default: {
        // The wide packer's share first, if there is one. Then a word per
        // group, in a loop that vectorizes; then each is stored 8 bytes at
        // a time of which `bits` are kept (the next group's store
        // overwrites the rest), and the last ones, whose stores would pass
        // the end, `bits` bytes at a time.
        const uint64_t done = six_ != nullptr ? six_(codes_, groups, out_) : 0;
        for (uint64_t g = done; g < groups; ++g) {
          words_[g] = Compact(LoadLe<uint64_t>(codes_ + 8 * g), bits_);
        }
        const uint64_t end = groups * bits_;
        uint64_t g = done;
        for (; g * bits_ + 8 <= end; ++g) StoreLe<uint64_t>(out_ + g * bits_, words_[g]);
        for (; g < groups; ++g) {
          uint8_t word[8];
          StoreLe<uint64_t>(word, words_[g]);
          memcpy(out_ + g * bits_, word, bits_);
        }
      }
    }
    out_ += groups * bits_;
  }

  uint8_t* out_;
  const uint32_t bits_;
  const SixBitPacker six_;
  uint64_t pending_ = 0;  // codes waiting for a full group, < 8
  uint8_t codes_[kBlock + 8];
  uint64_t words_[kBlock / 8 + 1];
};

// Reads the packed stream back as codes, one a byte, in order.
class CodeUnpacker {
 public:
  CodeUnpacker(const uint8_t* in, uint64_t n, uint32_t bits)
      : in_(in), end_(in + PackedBytes(n, bits)), bits_(bits) {}

  // The next count <= kBlock codes (the stream must hold them).
  GRADWIRE_CPU_INLINE const uint8_t* Next(uint64_t count) {
    memmove(codes_, codes_ + taken_, ready_ - taken_);
    ready_ -= taken_;
    taken_ = count;
    const uint64_t groups = count > ready_ ? (count - ready_ + 7) / 8 : 0;
    // Groups wholly inside the stream, then at most one cut short.
    const uint64_t left = static_cast<uint64_t>(end_ - in_) / bits_;
    const uint64_t whole = groups < left ? groups : left;
    uint8_t* codes = codes_ + ready_;
    switch (bits_) {
      case 1:
        UnpackBytes<1>(in_, whole, codes);
        break;
      case 2:
        UnpackBytes<2>(in_, 2 * whole, codes);
        break;
      case 4:
        UnpackBytes<4>(in_, 4 * whole, codes);
        break;
      case 8:
        memcpy(codes, in_, 8 * whole);
        break;
      default:
        for (uint64_t g = 0; g < whole; ++g) {
          StoreLe<uint64_t>(codes + 8 * g, Expand(LoadGroup(in_ + g * bits_), bits_));
        }
    }
    in_ += whole * bits_;
    if (whole < groups) {
      StoreLe<uint64_t>(codes + 8 * whole, Expand(LoadGroup(in_), bits_));
      in_ = end_;
    }
    ready_ += 8 * groups;
    return codes_;
  }

 private:
  // The group's bytes at p (fewer at the end of the stream), little endian.
  GRADWIRE_CPU_INLINE uint64_t LoadGroup(const uint8_t* p) const {
    if (end_ - p >= 8) return LoadLe<uint64_t>(p) & Mask();
    uint8_t word[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint64_t left = static_cast<uint64_t>(end_ - p);
    memcpy(word, p, left < bits_ ? left : bits_);
    return LoadLe<uint64_t>(word);
  }
  GRADWIRE_CPU_INLINE uint64_t Mask() const {
    return bits_ == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bits_)) - 1;
  }

  const uint8_t* in_;
  const uint8_t* end_;
  const uint32_t bits_;
  uint64_t ready_ = 0;  // codes unpacked into codes_
  uint64_t taken_ = 0;  // of which handed out by the last Next
  uint8_t codes_[kBlock + 16];
};

}  // namespace qsgd_packing
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QSGD_PACKING_H_
