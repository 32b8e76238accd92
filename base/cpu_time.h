// CPU time, for measurements that must not count time a thread or process
// spent descheduled (ranks sharing cores, benchmarks on a busy machine).
//
//   ThreadCpuSeconds()   the calling thread's CPU time
//   ProcessCpuSeconds()  every thread of this process, user + system (the
//                        kernel's network work charged to it included)
//
// Both in seconds from an arbitrary origin: subtract two readings.
#ifndef GRADWIRE_BASE_CPU_TIME_H_
#define GRADWIRE_BASE_CPU_TIME_H_

#include <time.h>

namespace gradwire {

inline double CpuSeconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

inline double ThreadCpuSeconds() { return CpuSeconds(CLOCK_THREAD_CPUTIME_ID); }
inline double ProcessCpuSeconds() { return CpuSeconds(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace gradwire

#endif  // GRADWIRE_BASE_CPU_TIME_H_
