// Communicator::AllreduceMeanOnDevice on the host stand-in for a GPU
// (kernels/host_device.h), ranks on threads sharing one "device", each
// on its own stream, like ranks sharing one GPU: results, residuals and
// checkpoints equal the host path's bit for bit, only compact bytes cross
// on the compressed path, and misuse is refused. Likewise GradientExchanger
// with device gradients against one with host gradients.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gloo/rendezvous/hash_store.h"
#include "gradwire/kernels/host_device.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_store.h"
#include "gtest/gtest.h"
#include "tests/synthetic_gradient.h"

namespace gradwire {
namespace {

using kernels::CopyKind;
using kernels::HostDevice;

constexpr int kRanks = 3;

// One communicator per rank, built on threads (Create is collective).
std::vector<std::unique_ptr<Communicator>> MakeWorld(
    const std::string& spec, kernels::Device* device,
    const std::function<void(CommunicatorOptions&)>& tweak = nullptr) {
  static int scope = 0;
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "job", absl::Seconds(20));
  const std::string name = std::to_string(scope++);
  std::vector<std::unique_ptr<Communicator>> comms(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto world =
          transport::GlooGroup::Create(r, kRanks, store->Scoped(name), transport::GroupOptions());
      ASSERT_TRUE(world.ok()) << world.status();
      auto secret = JobSecret::FromValue("0123456789abcdef0123", "test");
      auto auth = FrameAuthenticator::Create(*secret, "job");
      CommunicatorOptions options;
      options.compression = *CompressionSpec::Parse(spec);
      options.dense_below_elements = 1000;
      options.exchange = ExchangeKind::kSparseAllgather;  // as on the device
      options.device = device;
      if (tweak) tweak(options);
      // Hierarchical: one rank per node.
      const int node = options.hierarchical ? r : 0;
      auto comm = Communicator::Create(std::move(*world), node, 1, std::move(*auth), options);
      ASSERT_TRUE(comm.ok()) << comm.status();
      comms[r] = std::move(*comm);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

void OnEveryRank(const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back(f, r);
  for (auto& t : threads) t.join();
}

std::vector<float> Download(HostDevice& d, const float* p, size_t n, kernels::cuda::Stream s) {
  std::vector<float> v(n);
  EXPECT_TRUE(d.Copy(v.data(), p, n * 4, CopyKind::kDeviceToHost, s).ok());
  EXPECT_TRUE(d.WaitStream(s, absl::Now() + absl::Seconds(5)).ok());
  return v;
}

// Checkpoints of the host and the device path (a Communicator or a
// GradientExchanger each): the same bytes from either, and the host's
// restores on the device one.
template <typename Exchange>
void ExpectSameCheckpoint(Exchange& host, Exchange& dev) {
  absl::StatusOr<std::string> hs = host.SaveState(), ds = dev.SaveState();
  ASSERT_TRUE(hs.ok() && ds.ok()) << ds.status();
  EXPECT_EQ(*hs, *ds);
  EXPECT_TRUE(dev.RestoreState(*hs).ok());
}

bool SameBits(absl::Span<const float> a, absl::Span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

class DeviceExchangeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceExchangeTest, EqualsTheHostPathBitForBit) {
  HostDevice device;  // deferred: a missing wait or early reuse shows
  auto host = MakeWorld(GetParam(), nullptr);
  auto dev = MakeWorld(GetParam(), &device);
  const size_t n = 20000;
  std::vector<kernels::cuda::Stream> streams(kRanks);
  std::vector<float*> d_data(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    streams[r] = device.CreateStream();
    d_data[r] = static_cast<float*>(*device.Allocate(n * 4));
  }
  for (uint64_t step = 0; step < 3; ++step) {
    for (ExchangePath path : {ExchangePath::kCompressed, ExchangePath::kDense}) {
      const uint32_t bucket = path == ExchangePath::kCompressed ? 1 : 2;
      std::vector<std::vector<float>> want(kRanks), got(kRanks);
      device.ResetCounters();
      OnEveryRank([&](int r) {
        want[r] = testing::SyntheticGradient(n, 10 * step + r);
        ASSERT_TRUE(
            device.Copy(d_data[r], want[r].data(), n * 4, CopyKind::kHostToDevice, streams[r])
                .ok());
        absl::Status s = dev[r]->AllreduceMeanOnDevice(bucket, step, absl::MakeSpan(d_data[r], n),
                                                       path, streams[r]);
        ASSERT_TRUE(s.ok()) << s;
        got[r] = Download(device, d_data[r], n, streams[r]);
      });
      const HostDevice::Counters c = device.counters();
      if (path == ExchangePath::kCompressed) {
        // Only frames crossed: far less than one dense buffer per rank.
        EXPECT_LT(c.device_to_host_bytes - kRanks * n * 4, kRanks * n * 4 / 4)
            << "device->host bytes beyond the test's own downloads";
        EXPECT_LT(c.host_to_device_bytes - kRanks * n * 4, kRanks * n * 4)
            << "host->device bytes beyond the test's own uploads";
      }
      OnEveryRank([&](int r) {
        absl::Status s = host[r]->AllreduceMean(bucket, step, absl::MakeSpan(want[r]), path);
        ASSERT_TRUE(s.ok()) << s;
      });
      for (int r = 0; r < kRanks; ++r) {
        EXPECT_TRUE(SameBits(got[r], want[r]))
            << "rank " << r << " step " << step << " bucket " << bucket;
      }
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    absl::Span<const float> hr = host[r]->Residual(1), dr = dev[r]->Residual(1);
    if (!hr.empty()) {
      EXPECT_TRUE(device.IsDeviceMemory(dr.data()));
      EXPECT_TRUE(SameBits(Download(device, dr.data(), dr.size(), streams[r]), hr));
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSameCheckpoint(*host[r], *dev[r]));
  }
  EXPECT_TRUE(device.violations().empty());
  OnEveryRank([&](int r) {
    EXPECT_TRUE(dev[r]->Close().ok());
    EXPECT_TRUE(host[r]->Close().ok());
  });
  for (int r = 0; r < kRanks; ++r) device.Free(d_data[r]);
}

INSTANTIATE_TEST_SUITE_P(Codecs, DeviceExchangeTest,
                         ::testing::Values("topk:ratio=0.01", "randomk:ratio=0.02,seed=5",
                                           "qsgd:bits=4,bucket=128",
                                           "topk:ratio=0.02,values=fp16,indices=varint"));

TEST(DeviceExchangeErrors, MisuseIsRefusedWithoutPoisoning) {
  HostDevice device;
  auto comms = MakeWorld("topk:ratio=0.01", &device);
  const size_t n = 4000;
  std::vector<float> host_data(n, 1.0f);
  float* d = static_cast<float*>(*device.Allocate(n * 4));
  auto bogus = reinterpret_cast<kernels::cuda::Stream>(uintptr_t{0xbad0});
  OnEveryRank([&](int r) {
    // A host buffer on the device path.
    EXPECT_EQ(comms[r]
                  ->AllreduceMeanOnDevice(1, 0, absl::MakeSpan(host_data),
                                          ExchangePath::kCompressed, nullptr)
                  .code(),
              absl::StatusCode::kInvalidArgument);
    // A stream the device does not know.
    EXPECT_EQ(
        comms[r]
            ->AllreduceMeanOnDevice(1, 0, absl::MakeSpan(d, n), ExchangePath::kCompressed, bogus)
            .code(),
        absl::StatusCode::kInvalidArgument);
    // A length past the end of the device buffer, on either path (the
    // kernels would read and write past it).
    for (ExchangePath path : {ExchangePath::kCompressed, ExchangePath::kDense}) {
      absl::Status s =
          comms[r]->AllreduceMeanOnDevice(1, 0, absl::MakeSpan(d, n + 1), path, nullptr);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_NE(s.message().find("data: byte 16000 of the 16004"), absl::string_view::npos) << s;
    }
    EXPECT_TRUE(comms[r]->health().ok());
  });
  // A device buffer on the host path, either path.
  for (ExchangePath path : {ExchangePath::kCompressed, ExchangePath::kDense}) {
    absl::Status s = comms[0]->AllreduceMean(1, 0, absl::MakeSpan(d, n), path);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_TRUE(comms[0]->health().ok());
  device.Free(d);
}

// GradientExchanger with device gradients: the same steps through a host
// exchanger and a device exchanger (buckets in device memory, exchanged by
// AllreduceMeanOnDevice) give the same bits, residuals and checkpoints.
struct Tensor {
  const char* name;
  size_t size;
};
// Compressed and dense (< 1000 elements) tensors; with 10000-float
// buckets, several buckets of each path, one tensor alone in its own.
constexpr Tensor kTensors[] = {
    {"conv1", 6000}, {"bias1", 300}, {"conv2", 9000}, {"fc", 20000}, {"bias2", 200}, {"out", 3000},
};
constexpr size_t kSlotTensor = 3;  // "fc": from step 1, written into its GradientSlot

class DeviceExchangerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceExchangerTest, EqualsTheHostExchangerBitForBit) {
  HostDevice device;  // deferred: a missing wait or a copy on the wrong stream shows
  auto host = MakeWorld(GetParam(), nullptr);
  auto dev = MakeWorld(GetParam(), &device);
  ExchangerOptions options;
  options.bucket_bytes = 10000 * 4;
  // Device buckets carry no dense section: the host exchanger sends its
  // dense tail by the ring too, as the device one does.
  options.carry_dense_tail = false;
  constexpr size_t kCount = sizeof(kTensors) / sizeof(kTensors[0]);
  std::vector<std::unique_ptr<GradientExchanger>> hx(kRanks), dx(kRanks);
  std::vector<kernels::cuda::Stream> streams(kRanks);
  std::vector<std::vector<float*>> d_grads(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    streams[r] = device.CreateStream();
    for (const Tensor& t : kTensors)
      d_grads[r].push_back(static_cast<float*>(*device.Allocate(t.size * 4)));
    auto h = GradientExchanger::Create(std::move(host[r]), options);
    ExchangerOptions device_options = options;
    device_options.stream = streams[r];
    auto d = GradientExchanger::Create(std::move(dev[r]), device_options);
    ASSERT_TRUE(h.ok() && d.ok());
    hx[r] = std::move(*h);
    dx[r] = std::move(*d);
  }
  const absl::Duration timeout = absl::Seconds(30);
  OnEveryRank([&](int r) {
    for (uint64_t step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> source(kCount), want(kCount);
      ASSERT_TRUE(hx[r]->BeginStep(step).ok());
      for (size_t t = 0; t < kCount; ++t) {
        source[t] =
            testing::SyntheticGradient(kTensors[t].size, static_cast<int>(100 * step + 10 * t + r));
        want[t] = source[t];
        ASSERT_TRUE(hx[r]->Submit(kTensors[t].name, absl::MakeSpan(want[t])).ok());
      }
      ASSERT_TRUE(hx[r]->Flush().ok());
      ASSERT_TRUE(hx[r]->WaitAll(timeout).ok()) << hx[r]->health();

      ASSERT_TRUE(dx[r]->BeginStep(step).ok());
      std::vector<absl::Span<float>> spans(kCount);
      for (size_t t = 0; t < kCount; ++t) {
        spans[t] = absl::MakeSpan(d_grads[r][t], kTensors[t].size);
        if (t == kSlotTensor && step > 0) {
          absl::StatusOr<absl::Span<float>> slot = dx[r]->GradientSlot(kTensors[t].name);
          ASSERT_TRUE(slot.ok()) << slot.status();
          EXPECT_TRUE(device.IsDeviceMemory(slot->data()));
          spans[t] = *slot;
        }
        // The "backward pass": the gradient is produced on the stream.
        ASSERT_TRUE(device
                        .Copy(spans[t].data(), source[t].data(), spans[t].size() * 4,
                              CopyKind::kHostToDevice, streams[r])
                        .ok());
        absl::StatusOr<BucketTicket> ticket = dx[r]->Submit(kTensors[t].name, spans[t]);
        ASSERT_TRUE(ticket.ok()) << ticket.status();
      }
      ASSERT_TRUE(dx[r]->Flush().ok());
      ASSERT_TRUE(dx[r]->WaitAll(timeout).ok()) << dx[r]->health();
      for (size_t t = 0; t < kCount; ++t) {
        std::vector<float> got = Download(device, spans[t].data(), spans[t].size(), streams[r]);
        EXPECT_TRUE(SameBits(got, want[t]))
            << "rank " << r << " step " << step << " tensor " << kTensors[t].name;
      }
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    // The device residuals come through the host in the same checksummed
    // bytes, and restore.
    ASSERT_NO_FATAL_FAILURE(ExpectSameCheckpoint(*hx[r], *dx[r]));
  }
  EXPECT_TRUE(device.violations().empty());
  OnEveryRank([&](int r) {
    EXPECT_TRUE(dx[r]->Close(timeout).ok());
    EXPECT_TRUE(hx[r]->Close(timeout).ok());
  });
  dx.clear();  // frees the device buckets before the device goes
  for (int r = 0; r < kRanks; ++r) {
    for (float* p : d_grads[r]) device.Free(p);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, DeviceExchangerTest,
                         ::testing::Values("topk:ratio=0.01", "qsgd:bits=4,bucket=128",
                                           "randomk:ratio=0.02,seed=5"));

// Refusals of device gradients by an exchanger: each poisons nothing.
TEST(DeviceExchangerErrors, RefusedWithoutPoisoning) {
  HostDevice device;
  const size_t n = 4000;
  std::vector<float> h(n, 1.0f);
  float* d = static_cast<float*>(*device.Allocate(n * 4));
  const absl::Span<float> on_device = absl::MakeSpan(d, n), on_host = absl::MakeSpan(h);
  auto comms = MakeWorld("topk:ratio=0.01", &device);
  auto make = [&](std::unique_ptr<Communicator> comm, kernels::cuda::Stream stream) {
    ExchangerOptions options;
    options.stream = stream;
    auto ex = GradientExchanger::Create(std::move(comm), options);
    EXPECT_TRUE(ex.ok()) << ex.status();
    EXPECT_TRUE((*ex)->BeginStep(0).ok());
    return std::move(*ex);
  };
  auto expect = [](absl::StatusOr<BucketTicket> got, absl::StatusCode code, const char* words,
                   const GradientExchanger& ex) {
    EXPECT_EQ(got.status().code(), code) << got.status();
    EXPECT_NE(got.status().message().find(words), absl::string_view::npos) << got.status();
    EXPECT_TRUE(ex.health().ok()) << ex.health();
  };
  const kernels::cuda::Stream stream = device.CreateStream();
  {  // Device first, then host: one kind per exchanger.
    auto ex = make(std::move(comms[0]), stream);
    EXPECT_TRUE(ex->Submit("a", on_device).ok());
    expect(ex->Submit("b", on_host), absl::StatusCode::kInvalidArgument, "one kind", *ex);
    EXPECT_TRUE(ex->Submit("b", on_device).ok());  // still usable
  }
  {  // Host first, then device.
    auto ex = make(std::move(comms[1]), stream);
    EXPECT_TRUE(ex->Submit("a", on_host).ok());
    expect(ex->Submit("b", on_device), absl::StatusCode::kInvalidArgument, "one kind", *ex);
  }
  {  // A device gradient longer than its buffer.
    auto more = MakeWorld("topk:ratio=0.01", &device);
    auto ex = make(std::move(more[0]), stream);
    expect(ex->Submit("a", absl::MakeSpan(d + 1, n)), absl::StatusCode::kInvalidArgument,
           "Submit(\"a\"): byte 15996 of the 16000", *ex);
    EXPECT_TRUE(ex->Submit("a", absl::MakeSpan(d + 1, n - 1)).ok());  // still usable
  }
  {  // A stream the device does not know.
    auto bogus = reinterpret_cast<kernels::cuda::Stream>(uintptr_t{0xbad0});
    auto ex = make(std::move(comms[2]), bogus);
    expect(ex->Submit("a", on_device), absl::StatusCode::kInvalidArgument, "stream", *ex);
  }
  {  // Hierarchical: the device path is flat only.
    auto hier = MakeWorld("topk:ratio=0.01", &device,
                          [](CommunicatorOptions& o) { o.hierarchical = true; });
    auto ex = make(std::move(hier[0]), stream);
    expect(ex->Submit("a", on_device), absl::StatusCode::kUnimplemented, "hierarchical", *ex);
  }
  {  // A forced sparse allreduce: the device path takes the allgather only.
    auto forced = MakeWorld("topk:ratio=0.01", &device, [](CommunicatorOptions& o) {
      o.exchange = ExchangeKind::kSparseAllreduce;
    });
    auto ex = make(std::move(forced[0]), stream);
    expect(ex->Submit("a", on_device), absl::StatusCode::kUnimplemented, "sparse allreduce", *ex);
  }
  device.Free(d);
}

}  // namespace
}  // namespace gradwire
