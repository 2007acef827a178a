#include "executor/dma.hpp"

#include <algorithm>
#include <cassert>

namespace pipecheck::executor {

DmaEngine::DmaEngine(int workers, const Clock &clock) : clock_(clock) {
  for (int k = 0; k < workers; ++k)
    threads_.emplace_back([this, k] { worker_loop(k + 1); });
}

DmaEngine::~DmaEngine() {
  drain();
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto &t : threads_)
    t.join();
}

void DmaEngine::perform(Transfer &t, int thread) {
  t.thread = thread;
  t.t_start_ns = clock_.now_ns();
  copy_view(t.src, t.dst);
  t.t_end_ns = clock_.now_ns();
}

void DmaEngine::worker_loop(int id) {
  std::unique_lock<std::mutex> lk(m_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return; // stop_ and nothing left
    Transfer *t = queue_.front();
    queue_.pop_front();
    t->taken_ = true;
    lk.unlock();
    perform(*t, id);
    lk.lock();
    t->done_ = true;
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
      t.taken_ = true;
      run_here = true;
    } else {
      done_cv_.wait(lk, [&] { return t.done_; });
    }
  }
  if (run_here) {
    perform(t, 0);
    std::lock_guard<std::mutex> lk(m_);
    t.done_ = true;
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
