// Compresses a ResNet-50-shaped gradient (25,557,032 parameters in 161
// tensors, heavy-tailed values with per-layer scales) with each codec over
// several training steps, with error feedback, and prints what it costs
// and what it loses:
//
//   bazel run -c opt //tools:codec_demo -- --spec="topk:ratio=0.001;qsgd:bits=2"
//
// --spec takes the library's compression spec strings (lib/codec/
// compression_spec.h), several separated by ';'; without it every method
// runs with its default settings. Bad flags print which flag and what
// range is allowed, and exit with status 2.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/tools/command_line.h"

// Flags are strings parsed here, so that a malformed value gets the same
// clear message and exit status as an out-of-range one.
ABSL_FLAG(std::string, spec, "",
          "compression specs separated by ';', e.g. \"topk:ratio=0.001;qsgd:bits=2,bucket=128\" "
          "(settings: ratio, bits, bucket, ef, seed, values, indices); empty runs every method "
          "with its defaults");
ABSL_FLAG(std::string, steps, "5", "training steps to simulate, 1..1000");

namespace gradwire {
namespace {

[[noreturn]] void FlagError(const std::string& message) {
  std::fprintf(stderr, "codec_demo: %s\n", message.c_str());
  std::exit(2);
}

// The parameter tensors of torchvision's ResNet-50, in order.
std::vector<uint64_t> ResNet50LayerSizes() {
  std::vector<uint64_t> sizes = {64 * 3 * 7 * 7, 64, 64};  // conv1, bn1
  uint64_t inplanes = 64;
  const int stages[4][2] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};
  for (const auto& stage : stages) {
    const uint64_t planes = stage[0];
    for (int block = 0; block < stage[1]; ++block) {
      sizes.insert(sizes.end(), {inplanes * planes, planes, planes,              // 1x1 conv, bn
                                 planes * planes * 9, planes, planes,            // 3x3 conv, bn
                                 planes * planes * 4, planes * 4, planes * 4});  // 1x1, bn
      if (block == 0) sizes.insert(sizes.end(), {inplanes * planes * 4, planes * 4, planes * 4});
      inplanes = planes * 4;
    }
  }
  sizes.insert(sizes.end(), {2048 * 1000, 1000});  // fc
  return sizes;
}

// Gradients whose statistics look like a real network's: each tensor has
// its own scale (spread over two decades), values are Student-t with 3
// degrees of freedom (heavy tails), and a persistent per-element component
// makes consecutive steps correlated, as they are in training.
class GradientSource {
 public:
  GradientSource(const std::vector<uint64_t>& sizes, uint64_t seed) {
    uint64_t n = 0;
    for (uint64_t s : sizes) n += s;
    base_.resize(n);
    noise_.resize(n);
    std::mt19937_64 rng(seed ^ 0x5eed);
    std::normal_distribution<float> normal;
    uint64_t at = 0;
    for (uint64_t s : sizes) {
      const float scale =
          1e-3f * std::pow(10.0f, 2.0f * std::uniform_real_distribution<float>()(rng));
      for (uint64_t i = 0; i < s; ++i, ++at) {
        float chi2 = 0;  // chi-square with 3 degrees of freedom, over 3
        for (int d = 0; d < 3; ++d) {
          const float z = normal(rng);
          chi2 += z * z / 3.0f;
        }
        base_[at] = scale * normal(rng) / std::sqrt(chi2 + 1e-6f);
        noise_[at] = scale * normal(rng);
      }
    }
  }

  uint64_t size() const { return base_.size(); }

  // The whole gradient at `step`.
  void Fill(uint64_t step, std::vector<float>* g) const {
    const uint64_t n = base_.size();
    const uint64_t shift = (step * 7919 * 1021) % n;
    g->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t j = i + shift < n ? i + shift : i + shift - n;
      (*g)[i] = 0.6f * base_[i] + noise_[j];
    }
  }

 private:
  std::vector<float> base_, noise_;
};

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

double DiffNorm(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return std::sqrt(s);
}

struct Row {
  std::string spec;
  double bytes = 0, encode_ms = 0, decode_ms = 0, step_error = 0, sum_error = 0, residual = 0;
};

// The settings that matter for the method, for the table.
std::string ShortSpec(const CompressionSpec& spec) {
  std::string out(MethodName(spec.method));
  const char* values[] = {"fp32", "fp16", "bf16", "packed"};
  switch (spec.method) {
    case Method::kTopK:
    case Method::kApproxTopK:
      absl::StrAppend(&out, ":ratio=", spec.ratio,
                      ",values=", values[static_cast<int>(spec.values)],
                      spec.indices == IndexEncoding::kDeltaVarint ? ",indices=varint" : "");
      break;
    case Method::kRandomK:
      absl::StrAppend(&out, ":ratio=", spec.ratio,
                      ",values=", values[static_cast<int>(spec.values)]);
      break;
    case Method::kQsgd:
      absl::StrAppend(&out, ":bits=", spec.quant_bits, ",bucket=", spec.bucket_size);
      break;
    case Method::kSign:
      absl::StrAppend(&out, ":bucket=", spec.bucket_size);
      break;
    default:
      break;
  }
  absl::StrAppend(&out, spec.UsesErrorFeedback() ? " +EF" : "");
  return out;
}

Row RunCodec(const CompressionSpec& spec, const std::vector<uint64_t>& sizes,
             const GradientSource& source, int steps) {
  Row row;
  row.spec = ShortSpec(spec);
  std::unique_ptr<Codec> codec = *MakeCodec(spec);
  ErrorFeedback ef(*codec);
  const uint64_t n = source.size();
  uint64_t max_layer = *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(max_layer));
  std::vector<float> grad, decoded(n), grad_sum(n, 0.0f), sent_sum(n, 0.0f);
  using Clock = std::chrono::steady_clock;
  for (int step = 0; step < steps; ++step) {
    source.Fill(step, &grad);
    std::fill(decoded.begin(), decoded.end(), 0.0f);
    uint64_t offset = 0;
    double bytes = 0, enc = 0, dec = 0;
    for (size_t layer = 0; layer < sizes.size(); ++layer) {
      const absl::Span<const float> g(grad.data() + offset, sizes[layer]);
      const std::string key = absl::StrCat("layer", layer);
      const auto t0 = Clock::now();
      absl::StatusOr<EncodeStats> stats = ef.Encode(key, g, step, absl::MakeSpan(frame));
      const auto t1 = Clock::now();
      if (!stats.ok()) {
        std::fprintf(stderr, "codec_demo: encode failed: %s\n", stats.status().ToString().c_str());
        std::exit(1);
      }
      absl::Status s =
          codec->DecodeAccumulate(absl::MakeSpan(frame.data(), stats->frame_bytes),
                                  absl::MakeSpan(decoded.data() + offset, sizes[layer]));
      const auto t2 = Clock::now();
      if (!s.ok()) {
        std::fprintf(stderr, "codec_demo: decode failed: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      bytes += stats->frame_bytes;
      enc += std::chrono::duration<double, std::milli>(t1 - t0).count();
      dec += std::chrono::duration<double, std::milli>(t2 - t1).count();
      offset += sizes[layer];
    }
    for (uint64_t i = 0; i < n; ++i) {
      grad_sum[i] += grad[i];
      sent_sum[i] += decoded[i];
    }
    // Averages over steps after the first (which warms caches).
    if (step > 0 || steps == 1) {
      const double w = steps == 1 ? 1.0 : 1.0 / (steps - 1);
      row.bytes += bytes * w;
      row.encode_ms += enc * w;
      row.decode_ms += dec * w;
    }
    row.step_error = DiffNorm(decoded, grad) / Norm(grad);
  }
  row.sum_error = DiffNorm(sent_sum, grad_sum) / Norm(grad_sum);
  double residual = 0;
  for (size_t layer = 0; layer < sizes.size(); ++layer) {
    for (float r : ef.Residual(absl::StrCat("layer", layer)))
      residual += static_cast<double>(r) * r;
  }
  row.residual = std::sqrt(residual) / Norm(grad_sum);
  return row;
}

std::vector<CompressionSpec> SpecsFromFlags() {
  std::vector<std::string> texts =
      absl::StrSplit(absl::GetFlag(FLAGS_spec), ';', absl::SkipWhitespace());
  if (texts.empty()) {
    texts = {"none", "fp16", "bf16", "topk", "approx_topk", "randomk", "qsgd", "sign"};
  }
  std::vector<CompressionSpec> specs;
  for (const std::string& text : texts) {
    absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
    if (!spec.ok()) {
      FlagError(absl::StrCat("--spec: \"", text, "\": ", spec.status().message()));
    }
    specs.push_back(*spec);
  }
  return specs;
}

int Main() {
  const std::vector<CompressionSpec> specs = SpecsFromFlags();
  int steps = 0;
  const std::string steps_flag = absl::GetFlag(FLAGS_steps);
  if (!absl::SimpleAtoi(steps_flag, &steps) || steps < 1 || steps > 1000) {
    FlagError("--steps must be an integer in 1..1000, got \"" + steps_flag + "\"");
  }

  const std::vector<uint64_t> sizes = ResNet50LayerSizes();
  std::printf("Generating a ResNet-50-shaped gradient: %zu tensors, ", sizes.size());
  std::fflush(stdout);
  const GradientSource source(sizes, specs[0].seed);
  std::printf("%llu parameters (%.1f MB fp32), %d steps, error feedback per tensor.\n\n",
              static_cast<unsigned long long>(source.size()), source.size() * 4 / 1e6, steps);
  std::printf("%-40s %12s %9s %10s %10s %9s %9s %9s\n", "codec", "wire bytes", "ratio", "encode ms",
              "decode ms", "step err", "sum err", "resid");
  for (const CompressionSpec& spec : specs) {
    const Row r = RunCodec(spec, sizes, source, steps);
    std::printf("%-40s %12.0f %8.1fx %10.1f %10.1f %9.4f %9.4f %9.4f\n", r.spec.c_str(), r.bytes,
                source.size() * 4.0 / r.bytes, r.encode_ms, r.decode_ms, r.step_error, r.sum_error,
                r.residual);
    std::fflush(stdout);
  }
  std::printf(
      "\nwire bytes, encode/decode ms: per step (all 161 tensors, one CPU core).\n"
      "step err: |decoded - g| / |g| at the last step.  sum err: the same for the sums over all\n"
      "steps: with error feedback it is what is still in the residual, shrinking relative to\n"
      "the sum as steps go by.  resid: |residual| / |sum of gradients| at the end.\n");
  return 0;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Compresses a ResNet-50-shaped gradient with gradwire's codecs and prints a table.");
  // absl exits with status 1 on an unknown flag; this tool promises 2 and
  // a list of what it does know.
  static const char* const kKnown[] = {"spec", "steps",
                                       // absl's own
                                       "help", "helpfull", "helpshort", "helppackage", "version",
                                       "only_check_args", "flagfile", "fromenv", "tryfromenv",
                                       "undefok"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg = arg.substr(arg[1] == '-' ? 2 : 1);
    arg = arg.substr(0, arg.find('='));
    bool known = false;
    for (const char* k : kKnown) known = known || arg == k;
    if (!known) {
      std::fprintf(stderr, "codec_demo: unknown flag --%s (known: --spec, --steps)\n", arg.c_str());
      return 2;
    }
  }
  int exit_code = 0;
  if (!gradwire::tools::ParseToolCommandLine(argc, argv, "codec_demo", &exit_code)) return exit_code;
  return gradwire::Main();
}
