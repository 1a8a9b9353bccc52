// SaveQueue: the seam of the save pipeline (save_pipeline.h) that decides
// where the stages that need no other process run: the write of the
// databases, and the commit.
//
//   NewInlineSaveQueue()      runs each piece of work at once, in the
//                             caller's thread: a synchronous save;
//   NewBackgroundSaveQueue()  runs the work, in order, on one thread of its
//                             own while the caller goes on: an asynchronous
//                             save. One thread for the queue's life, so the
//                             memory one save frees is reused by the next.
//
// Work runs in the order it was queued, one piece at a time. Thread-safe;
// the destructor waits for the queued work.

#ifndef JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_QUEUE_H_
#define JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_QUEUE_H_

#include <functional>
#include <memory>

namespace jobgraph {

class SaveQueue {
 public:
  virtual ~SaveQueue() = default;

  // Whether Run runs the work before it returns.
  virtual bool runs_inline() const = 0;
  // Runs `work` after the work queued before it.
  virtual void Run(std::function<void()> work) = 0;
  // Returns once every piece of work queued so far has run.
  virtual void Wait() = 0;
  // Whether every piece of work queued so far has run (does not block).
  virtual bool Idle() = 0;
};

std::unique_ptr<SaveQueue> NewInlineSaveQueue();
std::unique_ptr<SaveQueue> NewBackgroundSaveQueue();

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_QUEUE_H_
