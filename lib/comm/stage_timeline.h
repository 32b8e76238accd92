// What a GradientExchanger's pipeline did during one step, as it ran: one
// span per stage each bucket went through, with the thread that ran it.
//
// ExchangeStats (exchange_stats.h) sums a step's time by kind; a timeline
// says when each part ran, so that gaps show: a pipeline thread idle while
// the other works, a bucket waiting for a pipeline slot, the wire idle
// while the compute thread encodes. GradientExchanger::StepTimeline()
// returns the spans of the current (or last finished) step;
// `exchange_bench --timeline_out` writes them in Chrome's trace format and
// tools/timeline_summary.py names where each millisecond of a step went.
//
// The stages (gradient_exchanger.h, "The pipeline"):
//   kQueued    an instant: the bucket was full (or flushed) and entered
//              the pipeline (the caller's thread, during backprop);
//   kEncode    (a) error feedback + encode + MAC, compute thread;
//   kTransfer  (b) the collectives of a staged bucket, comm thread;
//   kExchange  the whole exchange of an unstaged bucket (dense,
//              hierarchical, device), comm thread;
//   kFinish    (c) MAC checks + decode + average (staged buckets) and the
//              write-back into the caller's tensors, compute thread.
// Times are absl::Time (wall clock): spans of ranks on one machine line
// up; across machines they are as close as the hosts' clocks.
#ifndef GRADWIRE_LIB_COMM_STAGE_TIMELINE_H_
#define GRADWIRE_LIB_COMM_STAGE_TIMELINE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace gradwire {

enum class PipelineStage : uint8_t { kQueued, kEncode, kTransfer, kExchange, kFinish };

// "queued", "encode", "transfer", "exchange", "finish".
const char* PipelineStageName(PipelineStage stage);

// The thread a stage runs on: "caller", "compute" or "comm".
const char* PipelineThreadName(PipelineStage stage);

struct StageSpan {
  uint32_t bucket = 0;  // BucketTicket::bucket
  PipelineStage stage = PipelineStage::kQueued;
  absl::Time start;  // kQueued: start == end
  absl::Time end;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_STAGE_TIMELINE_H_
