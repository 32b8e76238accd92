#include "gradwire/lib/comm/stage_timeline.h"

namespace gradwire {

const char* PipelineStageName(PipelineStage stage) {
  switch (stage) {
    case PipelineStage::kQueued:
      return "queued";
    case PipelineStage::kEncode:
      return "encode";
    case PipelineStage::kTransfer:
      return "transfer";
    case PipelineStage::kExchange:
      return "exchange";
    case PipelineStage::kFinish:
      return "finish";
  }
  return "unknown";
}

const char* PipelineThreadName(PipelineStage stage) {
  switch (stage) {
    case PipelineStage::kQueued:
      return "caller";
    case PipelineStage::kEncode:
    case PipelineStage::kFinish:
      return "compute";
    case PipelineStage::kTransfer:
    case PipelineStage::kExchange:
      return "comm";
  }
  return "unknown";
}

}  // namespace gradwire
