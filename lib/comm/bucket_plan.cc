#include "gradwire/lib/comm/bucket_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gradwire {

const char* ExchangePathName(ExchangePath path) {
  return path == ExchangePath::kDense ? "dense" : "compressed";
}

ExchangePath PathRule::PathFor(uint64_t elements, bool one_dimensional) const {
  if (!compressing) return ExchangePath::kDense;
  if (elements < dense_below_elements) return ExchangePath::kDense;
  if (one_dimensional && dense_one_dimensional) return ExchangePath::kDense;
  return ExchangePath::kCompressed;
}

BucketPlan::BucketPlan(const PathRule& rule, uint64_t bucket_bytes)
    : rule_(rule), bucket_bytes_(bucket_bytes) {}

absl::Status BucketPlan::CheckShape(absl::string_view name, uint64_t elements,
                                    absl::Span<const int64_t> shape) {
  if (shape.empty()) return absl::OkStatus();
  uint64_t product = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\" has a negative dimension (", d, ")"));
    }
    // A product that wraps could equal `elements` by accident.
    if (__builtin_mul_overflow(product, static_cast<uint64_t>(d), &product)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\": its shape holds 2^64 elements or more"));
    }
  }
  if (product != elements) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" has ", elements,
                                                   " elements but its shape holds ", product));
  }
  return absl::OkStatus();
}

absl::StatusOr<BucketPlan::Added> BucketPlan::Add(absl::string_view name, uint64_t elements,
                                                  absl::Span<const int64_t> shape) {
  if (fixed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor \"", name, "\" added to a bucket plan that is already fixed"));
  }
  if (absl::Status s = CheckShape(name, elements, shape); !s.ok()) return s;
  const ExchangePath path = rule_.PathFor(elements, shape.size() == 1);
  int64_t& open = open_[path == ExchangePath::kDense ? 0 : 1];
  if (open < 0) {
    if (buckets_.size() >= UINT32_MAX) return absl::ResourceExhaustedError("too many buckets");
    PlannedBucket b;
    b.id = static_cast<uint32_t>(buckets_.size());
    b.path = path;
    buckets_.push_back(std::move(b));
    open = static_cast<int64_t>(buckets_.size() - 1);
  }
  PlannedBucket& bucket = buckets_[open];
  if (elements > kMaxBucketElements - bucket.elements) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" of ", elements,
                                                   " elements would put its bucket over ",
                                                   kMaxBucketElements, " elements"));
  }
  BucketMember m;
  m.name = std::string(name);
  m.offset = bucket.elements;
  m.size = elements;
  bucket.members.push_back(std::move(m));
  bucket.elements += elements;
  Added added;
  added.place = TensorPlace{bucket.id, static_cast<uint32_t>(bucket.members.size() - 1)};
  places_.push_back(added.place);
  if (bucket.elements * sizeof(float) >= bucket_bytes_) {
    added.closed = true;
    open = -1;
  }
  return added;
}

std::vector<uint32_t> BucketPlan::Fix() {
  std::vector<uint32_t> closed;
  for (int64_t& open : open_) {
    if (open >= 0) closed.push_back(static_cast<uint32_t>(open));
    open = -1;
  }
  std::sort(closed.begin(), closed.end());
  fixed_ = true;
  return closed;
}

absl::StatusOr<TensorPlace> BucketPlan::Expect(size_t index, absl::string_view name,
                                               uint64_t elements) const {
  if (index >= places_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor \"", name, "\" is number ", index + 1,
                     " but the bucket plan fixed at the first step has only ", places_.size(),
                     ": submit the same tensors in the same order every step"));
  }
  const TensorPlace place = places_[index];
  const BucketMember& m = member(place);
  if (m.name != name || m.size != elements) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor number ", index + 1, " is \"", name, "\" with ", elements,
                     " elements, but the bucket plan fixed at the first step expects \"", m.name,
                     "\" with ", m.size, ": submit the same tensors in the same order every step"));
  }
  return place;
}

absl::StatusOr<TensorPlace> BucketPlan::Find(absl::string_view name) const {
  for (const TensorPlace& place : places_) {
    if (member(place).name == name) return place;
  }
  return absl::NotFoundError(
      absl::StrCat("tensor \"", name, "\": no tensor of that name in the bucket plan"));
}

std::vector<BucketInfo> BucketPlan::Info() const {
  std::vector<BucketInfo> out;
  for (const PlannedBucket& b : buckets_) {
    BucketInfo info;
    info.id = b.id;
    info.path = b.path;
    info.elements = b.elements;
    for (const BucketMember& m : b.members) info.tensors.push_back(m.name);
    out.push_back(std::move(info));
  }
  return out;
}

std::string BucketPlan::Describe() const {
  std::string out;
  for (const PlannedBucket& b : buckets_) {
    absl::StrAppend(&out, "bucket ", b.id, ": ", ExchangePathName(b.path), ", ", b.members.size(),
                    " tensors, ", b.elements, " elements\n");
  }
  return out;
}

}  // namespace gradwire
