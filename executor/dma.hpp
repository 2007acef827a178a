#pragma once
/// The DMA engine: worker threads that perform copies between host arrays
/// asynchronously to the thread issuing them.
///
/// Hand-offs spin for a few microseconds before they sleep: a pipeline's next
/// copy or completion is usually that close, and a sleeping thread takes tens
/// of microseconds to wake.
///
/// Protocol (one issuing thread): `submit` hands a transfer to the workers;
/// from then on it has *taken effect* as far as the program is concerned. The
/// issuer calls `order_access` before it touches memory and `complete` at a
/// wait: both block until every submitted transfer whose footprint conflicts
/// (overlapping boxes, one side writing) has finished, so every byte is owned
/// by one thread at a time and the mutex hand-over orders the data (no data
/// races, TSan-clean). A transfer no worker has picked up yet is performed by
/// the issuer itself when it has to wait for it.

#include "executor/tensor.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pipecheck::executor {

/// Nanoseconds since construction.
class Clock {
public:
  Clock() : t0_(std::chrono::steady_clock::now()) {}
  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_)
        .count();
  }

private:
  std::chrono::steady_clock::time_point t0_;
};

/// One copy. The issuer owns it; the engine fills thread/t_*_ns.
struct Transfer {
  View src, dst;
  spec::Loc loc;
  bool is_in = true; ///< copy_in (HBM -> slot) or copy_out
  /// A copy out that writes only the elements of src differing from this
  /// view (shaped like dst): ProgramRunConfig::launch_snapshot's write-back.
  std::optional<View> changed_from;
  std::string buffer; ///< the slot side's buffer
  std::int64_t slot = -1;
  std::string label; ///< "A[3] -> X[1]"
  int thread = -1;   ///< who performed it (0: the issuer)
  std::int64_t t_start_ns = 0, t_end_ns = 0;
  bool submitted = false; ///< issuer-side
  bool finished = false;  ///< issuer-side: completion observed
  std::int64_t bytes() const { return src.size() * src.array->elem_bytes(); }

private:
  friend class DmaEngine;
  bool taken_ = false;            ///< guarded by the engine mutex
  std::atomic<bool> done_{false}; ///< set under the engine mutex; read by a spinning waiter
};

class DmaEngine {
public:
  /// `workers` threads (0: every transfer is performed by the issuer when it
  /// waits for it).
  DmaEngine(int workers, const Clock &clock);
  ~DmaEngine();
  DmaEngine(const DmaEngine &) = delete;
  DmaEngine &operator=(const DmaEngine &) = delete;

  /// Orders `t` after conflicting in-flight transfers, then queues it.
  /// Returns the nanoseconds the issuer blocked for that ordering.
  std::int64_t submit(Transfer &t);
  /// Blocks until `t` (submitted) has been performed.
  void complete(Transfer &t);
  /// Blocks until no in-flight transfer conflicts with reading (or writing)
  /// the view. Returns true when it had to wait.
  bool order_access(const View &v, bool write);
  /// Completes every submitted transfer.
  void drain();

private:
  void worker_loop(int id);
  void perform(Transfer &t, int thread);

  const Clock &clock_;
  std::mutex m_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Transfer *> queue_;
  std::atomic<std::size_t> queued_{0}; ///< queue_.size(), for workers spinning without the mutex
  bool stop_ = false;
  std::atomic<bool> stopping_{false}; ///< stop_, for spinning workers
  std::vector<Transfer *> inflight_;  ///< issuer-only: submitted, not yet observed done
  std::vector<std::thread> threads_;
};

} // namespace pipecheck::executor
