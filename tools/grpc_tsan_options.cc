// ThreadSanitizer's default options for our binaries that run a gRPC
// server or channel: the data server, cache_bench and the cache tests
// (compiled only under -fsanitize=thread; TSAN_OPTIONS still applies on
// top).
//
// Debian's gRPC, gpr and absl shared libraries are not instrumented, so
// TSan cannot see their synchronization, only the calls they make into
// its interceptors (memmove, operator new and delete, epoll_wait). It
// reported races between gRPC's own threads in every such binary (absl
// GraphCycles::GetId against itself, an absl::Status payload made on one
// gRPC thread and freed on another, Epoll1Poller against epoll_create1),
// none with a frame of ours. Suppressing them by name (race:libgrpc.so)
// made the data server spend its time symbolizing reports until clients
// timed out; ignore_noninstrumented_modules drops those interceptor calls
// at no cost. Accesses from our instrumented code are still checked. Not
// linked into anything that runs Gloo: there, uninstrumented code writing
// into our buffers is exactly what TSan must see.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1"; }
#endif
