#include "gradwire/tools/step_trace.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace tools {

namespace {

// The trace's threads, by tid: PipelineThreadName's names.
constexpr const char* kTraceThreads[] = {"caller", "compute", "comm"};

}  // namespace

void AppendTraceEvents(const std::vector<StageSpan>& spans, int rank, int step, absl::Time begun,
                       absl::Time ended, std::string* out) {
  auto us = [](absl::Time t) { return absl::ToDoubleMicroseconds(t - absl::UnixEpoch()); };
  auto event = [&](const char* name, const char* ph, int tid, absl::Time start, absl::Time end,
                   int64_t bucket) {
    if (!out->empty()) out->append(",\n");
    absl::StrAppendFormat(out, R"({"name": "%s", "ph": "%s", "pid": %d, "tid": %d, "ts": %.3f)",
                          name, ph, rank, tid, us(start));
    if (*ph == 'X') absl::StrAppendFormat(out, R"(, "dur": %.3f)", us(end) - us(start));
    if (*ph == 'i') out->append(R"(, "s": "t")");
    absl::StrAppendFormat(out, R"(, "args": {"step": %d)", step);
    if (bucket >= 0) absl::StrAppendFormat(out, R"(, "bucket": %d)", bucket);
    out->append("}}");
  };
  event("step", "X", 0, begun, ended, -1);
  for (const StageSpan& s : spans) {
    const absl::string_view thread = PipelineThreadName(s.stage);
    const int tid =
        static_cast<int>(std::find(std::begin(kTraceThreads), std::end(kTraceThreads), thread) -
                         std::begin(kTraceThreads));
    event(PipelineStageName(s.stage), s.stage == PipelineStage::kQueued ? "i" : "X", tid, s.start,
          s.end, s.bucket);
  }
}

std::string TraceJson(int rank, const std::string& events) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  absl::StrAppendFormat(&out,
                        R"({"name": "process_name", "ph": "M", "pid": %d, )"
                        R"("args": {"name": "rank %d"}})",
                        rank, rank);
  for (int tid = 0; tid < 3; ++tid) {
    absl::StrAppendFormat(&out,
                          ",\n"
                          R"({"name": "thread_name", "ph": "M", "pid": %d, "tid": %d, )"
                          R"("args": {"name": "%s"}})",
                          rank, tid, kTraceThreads[tid]);
  }
  if (!events.empty()) out += ",\n" + events;
  return out + "\n]}\n";
}

}  // namespace tools
}  // namespace gradwire
