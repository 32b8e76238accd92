// BucketPlan: which gradients travel together, and by which path.
//
// The two rules of a bucketed exchange, written once here for every user
// (GradientExchanger, Communicator::PathFor, and through the Python
// binding the DDP hook and tools/planner.py):
//
//   The path rule (PathRule): a tensor goes dense (exact fp32 ring
//   allreduce) when the method is "none", when it has fewer than
//   dense_below_elements elements, or when it is 1-D (biases, norm
//   scales) and dense_one_dimensional is set; otherwise compressed.
//   Small tensors are where compression saves less than it costs (DDP's
//   and HiTopKComm's rule of thumb).
//
//   Fusion: tensors arrive in submission order (backprop's). Each path has
//   one open bucket; a tensor joins the open bucket of its path, which
//   closes as soon as it holds at least bucket_bytes of fp32 (so a tensor
//   of bucket_bytes or more ends the bucket it joins). Buckets are numbered
//   in the order they open; Fix closes those still open, in that order.
//
//   BucketPlan plan(rule, 25 << 20);
//   for each tensor, in order:
//     BucketPlan::Added a = *plan.Add(name, elements, shape);
//     if (a.closed) ... bucket a.place.bucket is complete
//   for (uint32_t id : plan.Fix()) ... the partly filled rest
//   // later steps: plan.Expect(i, name, elements) for tensor number i
//
// Not thread-safe. A bucket's PlannedBucket (and its members) never moves
// once added and never changes once closed, so a reference taken under
// the caller's lock may be read by another thread afterwards.
#ifndef GRADWIRE_LIB_COMM_BUCKET_PLAN_H_
#define GRADWIRE_LIB_COMM_BUCKET_PLAN_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire {

enum class ExchangePath { kDense, kCompressed };
// "dense" or "compressed".
const char* ExchangePathName(ExchangePath path);

// The path rule (see above). Communicator fills it from its options.
struct PathRule {
  // False for method "none": every tensor goes dense.
  bool compressing = true;
  // Tensors with fewer elements go dense.
  uint64_t dense_below_elements = 16384;
  // 1-D tensors go dense whatever their size.
  bool dense_one_dimensional = true;

  ExchangePath PathFor(uint64_t elements, bool one_dimensional) const;
};

// One tensor inside its bucket: elements [offset, offset + size).
struct BucketMember {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// One bucket: its id (its position in the plan), path and tensors in
// fusion order; elements is the sum of their sizes.
struct PlannedBucket {
  uint32_t id = 0;
  ExchangePath path = ExchangePath::kDense;
  uint64_t elements = 0;
  std::vector<BucketMember> members;
};

// A bucket as callers report it: tensor names only.
struct BucketInfo {
  uint32_t id = 0;
  ExchangePath path = ExchangePath::kDense;
  uint64_t elements = 0;
  std::vector<std::string> tensors;
  // GradientExchanger: the compressed bucket whose frames carry this dense
  // one (ExchangerOptions::carry_dense_tail), or -1: its own exchange.
  int64_t carried_by = -1;
};

// Where a tensor lives: bucket id and index among the bucket's members.
struct TensorPlace {
  uint32_t bucket = 0;
  uint32_t member = 0;
};

class BucketPlan {
 public:
  // The most elements a bucket may sum to: its bytes (4 each) stay within
  // 64 bits. A bound on hostile shapes; real buckets are far smaller.
  static constexpr uint64_t kMaxBucketElements = uint64_t{1} << 61;

  // bucket_bytes > 0 (GradientExchanger checks its option).
  BucketPlan(const PathRule& rule, uint64_t bucket_bytes);

  // Checks that `shape`, if given (empty: unknown), holds `elements`.
  static absl::Status CheckShape(absl::string_view name, uint64_t elements,
                                 absl::Span<const int64_t> shape);

  // Building: adds the next tensor. Its path follows the rule, with
  // one_dimensional = (shape.size() == 1). `closed`: its bucket just
  // reached bucket_bytes and takes no more tensors. FailedPrecondition
  // once the plan is fixed; InvalidArgument for a shape that does not
  // hold `elements` (a negative dimension, a product of 2^64 or more) or a
  // bucket that would exceed kMaxBucketElements.
  struct Added {
    TensorPlace place;
    bool closed = false;
  };
  absl::StatusOr<Added> Add(absl::string_view name, uint64_t elements,
                            absl::Span<const int64_t> shape = {});

  // Ends building: closes the buckets still open and returns their ids in
  // the order they opened. Afterwards the plan is fixed.
  std::vector<uint32_t> Fix();
  bool fixed() const { return fixed_; }

  // A later step's tensor number `index` (from 0): its place if it is the
  // planned one (same name and size), else FailedPrecondition saying what
  // was expected ("submit the same tensors in the same order every step").
  absl::StatusOr<TensorPlace> Expect(size_t index, absl::string_view name, uint64_t elements) const;

  // The place of tensor `name`; NotFound if the plan has none.
  absl::StatusOr<TensorPlace> Find(absl::string_view name) const;

  const PathRule& rule() const { return rule_; }
  uint64_t bucket_bytes() const { return bucket_bytes_; }
  size_t tensor_count() const { return places_.size(); }
  size_t bucket_count() const { return buckets_.size(); }
  const PlannedBucket& bucket(uint32_t id) const { return buckets_[id]; }
  const BucketMember& member(const TensorPlace& place) const {
    return buckets_[place.bucket].members[place.member];
  }

  std::vector<BucketInfo> Info() const;
  // One line per bucket: "bucket 0: compressed, 3 tensors, 2359296 elements".
  std::string Describe() const;

 private:
  PathRule rule_;
  uint64_t bucket_bytes_;
  std::deque<PlannedBucket> buckets_;  // deque: a bucket never moves
  std::vector<TensorPlace> places_;    // per tensor, in submission order
  // The open bucket of each path (index = path), or -1.
  int64_t open_[2] = {-1, -1};
  bool fixed_ = false;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_BUCKET_PLAN_H_
