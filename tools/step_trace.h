// A GradientExchanger's step timeline (lib/comm/stage_timeline.h) as a
// Chrome trace (the JSON array format: chrome://tracing, Perfetto), as
// exchange_bench --timeline_out writes it and tools/timeline_summary.py
// reads it. One process per rank (pid = rank), three threads: the
// caller's (tid 0: the step and its buckets' "queued" instants), the
// exchanger's compute thread (1) and its comm thread (2). Times are
// microseconds since the Unix epoch, so that ranks on one machine line up.
#ifndef GRADWIRE_TOOLS_STEP_TRACE_H_
#define GRADWIRE_TOOLS_STEP_TRACE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gradwire/lib/comm/stage_timeline.h"

namespace gradwire {
namespace tools {

// Appends to *out (comma-separated trace event objects) one timed step:
// the step from `begun` to `ended` and every span of `spans`, each with
// its step number and bucket.
void AppendTraceEvents(const std::vector<StageSpan>& spans, int rank, int step, absl::Time begun,
                       absl::Time ended, std::string* out);

// The whole trace file of one rank: names for its process and threads,
// then `events` (what AppendTraceEvents gathered).
std::string TraceJson(int rank, const std::string& events);

}  // namespace tools
}  // namespace gradwire

#endif  // GRADWIRE_TOOLS_STEP_TRACE_H_
