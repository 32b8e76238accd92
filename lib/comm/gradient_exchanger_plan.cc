// GradientExchanger's bucket plan: the first step builds it (fusion and
// the path rule, bucket_plan.h), Flush pairs the dense tail with its
// carrier (ExchangerOptions::carry_dense_tail), and later steps read it
// (GradientSlot, Plan, DescribePlan).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/comm/gradient_exchanger.h"

namespace gradwire {

absl::StatusOr<GradientExchanger::Bucket*> GradientExchanger::PlanTensorLocked(
    absl::string_view name, uint64_t size, absl::Span<const int64_t> shape, uint32_t* member,
    bool* closed) {
  absl::StatusOr<BucketPlan::Added> added = plan_.Add(name, size, shape);
  if (!added.ok()) return added.status();
  const uint32_t id = added->place.bucket;
  if (id == buckets_.size()) {  // a new bucket
    buckets_.push_back(std::make_unique<Bucket>());
    Bucket& b = *buckets_.back();
    b.id = id;
    b.plan = &plan_.bucket(id);
    b.path = b.plan->path;
  }
  Bucket* bucket = buckets_[id].get();
  // Device buckets get device memory once queued (their size is final then).
  if (!DeviceGradientsLocked()) bucket->data.resize(bucket->plan->elements);
  bucket->targets.resize(bucket->plan->members.size());
  *member = added->place.member;
  *closed = added->closed;
  return bucket;
}

absl::StatusOr<absl::Span<float>> GradientExchanger::GradientSlot(absl::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_.fixed()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GradientSlot(\"", name, "\"): slots exist once the first step fixed the bucket plan"));
  }
  absl::StatusOr<TensorPlace> place = plan_.Find(name);
  if (!place.ok()) {
    return absl::Status(place.status().code(),
                        absl::StrCat("GradientSlot: ", place.status().message()));
  }
  const BucketMember& m = plan_.member(*place);
  return buckets_[place->bucket]->Data().subspan(m.offset, m.size);
}

void GradientExchanger::PairDenseTailLocked(const std::vector<uint32_t>& rest) {
  if (!options_.carry_dense_tail || DeviceGradientsLocked()) return;
  Bucket* dense = nullptr;
  Bucket* compressed = nullptr;
  for (uint32_t id : rest) {
    (buckets_[id]->path == ExchangePath::kDense ? dense : compressed) = buckets_[id].get();
  }
  // The agreed model's answer: the same everywhere.
  if (dense == nullptr || compressed == nullptr || dense->plan->elements == 0 ||
      !comm_->DenseTailRides(compressed->plan->elements, dense->plan->elements)) {
    return;
  }
  compressed->rider = dense;
  dense->carrier = compressed;
}

size_t GradientExchanger::bucket_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_.fixed() ? plan_.bucket_count() : 0;
}

std::vector<BucketInfo> GradientExchanger::Plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_.fixed()) return {};
  std::vector<BucketInfo> info = plan_.Info();
  for (BucketInfo& b : info) {
    if (const Bucket* carrier = buckets_[b.id]->carrier; carrier != nullptr) {
      b.carried_by = carrier->id;
    }
  }
  return info;
}

std::string GradientExchanger::DescribePlan() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_.fixed()) return "";
  std::string out = plan_.Describe();
  for (const auto& b : buckets_) {
    if (b->carrier != nullptr) {
      absl::StrAppend(&out, "bucket ", b->id, " rides in bucket ", b->carrier->id, "'s frames\n");
    }
  }
  return out;
}

}  // namespace gradwire
