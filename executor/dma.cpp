#include "executor/dma.hpp"

#include <algorithm>
#include <cassert>

namespace pipecheck::executor {

namespace {

// About one 1 MiB copy: long enough to bridge a pipeline's hand-offs, short
// enough that an idle engine soon sleeps.
constexpr std::chrono::microseconds kSpinLimit{50};

/// Polls `done` for up to kSpinLimit, yielding the core to anything else
/// runnable; true when it came true.
template <class Pred> bool spin_until(Pred done) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() - t0 > kSpinLimit) return done();
    std::this_thread::yield();
  }
}

} // namespace

DmaEngine::DmaEngine(int workers, const Clock &clock) : clock_(clock) {
  for (int k = 0; k < workers; ++k)
    threads_.emplace_back([this, k] { worker_loop(k + 1); });
}

DmaEngine::~DmaEngine() {
  drain();
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
    stopping_.store(true, std::memory_order_relaxed);
  }
  work_cv_.notify_all();
  for (auto &t : threads_)
    t.join();
}

void DmaEngine::perform(Transfer &t, int thread) {
  t.thread = thread;
  t.t_start_ns = clock_.now_ns();
  // A copy out lands in HBM, which the issuer does not read back soon.
  if (t.changed_from)
    copy_view_changed(t.src, t.dst, *t.changed_from);
  else
    copy_view(t.src, t.dst, t.is_in ? CopyHint::normal : CopyHint::stream_dst);
  t.t_end_ns = clock_.now_ns();
}

void DmaEngine::worker_loop(int id) {
  std::unique_lock<std::mutex> lk(m_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      lk.unlock();
      spin_until([&] {
        return queued_.load(std::memory_order_relaxed) > 0 || stopping_.load(std::memory_order_relaxed);
      });
      lk.lock();
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    }
    if (queue_.empty()) return; // stop_ and nothing left
    Transfer *t = queue_.front();
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_relaxed);
    t->taken_ = true;
    lk.unlock();
    perform(*t, id);
    lk.lock();
    t->done_.store(true, std::memory_order_release);
    done_cv_.notify_all();
  }
}

std::int64_t DmaEngine::submit(Transfer &t) {
  assert(!t.submitted);
  std::vector<Transfer *> conflicts;
  for (Transfer *u : inflight_)
    if (u->dst.box.overlaps(t.src.box) || u->dst.box.overlaps(t.dst.box) || u->src.box.overlaps(t.dst.box))
      conflicts.push_back(u);
  std::int64_t blocked = 0;
  if (!conflicts.empty()) {
    const auto t0 = clock_.now_ns();
    for (Transfer *u : conflicts)
      complete(*u);
    blocked = clock_.now_ns() - t0;
  }
  t.submitted = true;
  inflight_.push_back(&t);
  {
    std::lock_guard<std::mutex> lk(m_);
    queue_.push_back(&t);
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  if (!threads_.empty()) work_cv_.notify_one();
  return blocked;
}

void DmaEngine::complete(Transfer &t) {
  assert(t.submitted);
  if (t.finished) return;
  bool run_here = false;
  {
    std::unique_lock<std::mutex> lk(m_);
    if (!t.taken_) {
      // No worker has it yet: do it here rather than sit idle.
      auto it = std::find(queue_.begin(), queue_.end(), &t);
      assert(it != queue_.end());
      queue_.erase(it);
      queued_.store(queue_.size(), std::memory_order_relaxed);
      t.taken_ = true;
      run_here = true;
    } else if (!t.done_.load(std::memory_order_relaxed)) {
      lk.unlock();
      // The acquire pairs with the worker's release: its copy is visible.
      spin_until([&] { return t.done_.load(std::memory_order_acquire); });
      lk.lock();
      done_cv_.wait(lk, [&] { return t.done_.load(std::memory_order_relaxed); });
    }
  }
  if (run_here) {
    perform(t, 0);
    std::lock_guard<std::mutex> lk(m_);
    t.done_.store(true, std::memory_order_relaxed);
  }
  t.finished = true;
  inflight_.erase(std::find(inflight_.begin(), inflight_.end(), &t));
}

bool DmaEngine::order_access(const View &v, bool write) {
  std::vector<Transfer *> conflicts;
  for (Transfer *u : inflight_)
    if (u->dst.box.overlaps(v.box) || (write && u->src.box.overlaps(v.box))) conflicts.push_back(u);
  for (Transfer *u : conflicts)
    complete(*u);
  return !conflicts.empty();
}

void DmaEngine::drain() {
  while (!inflight_.empty())
    complete(*inflight_.front());
}

} // namespace pipecheck::executor
