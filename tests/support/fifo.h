// FIFOs (named pipes) for tests of code that must refuse them without opening them: opening
// one for reading blocks until a writer appears. run_unblocking_fifo runs the code on a thread
// and, if it has not returned in time, opens the FIFO for writing and closes it, which ends
// the blocked open (and any read: end of file), so a regression fails the test instead of
// hanging it.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "hourglass/base/error.h"

namespace hg::test {

inline void make_fifo(const std::string& path) {
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << "mkfifo " << path;
}

// Runs fn with a limit; returns its exception (null if it returned). Records a failure when
// fn was still running after `limit` (it was blocked on `fifo`).
inline std::exception_ptr run_unblocking_fifo(
    const std::string& fifo, const std::function<void()>& fn,
    std::chrono::seconds limit = std::chrono::seconds(20)) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo << " for " << limit.count() << " s";
    // O_NONBLOCK open for writing succeeds once a reader is waiting; repeat until it does.
    while (done.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  runner.join();
  try {
    done.get();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// The one-line text of the hg::Error in `e` ("" when there is none, with a recorded failure).
inline std::string error_text(std::exception_ptr e) {
  if (!e) {
    ADD_FAILURE() << "no error was thrown";
    return "";
  }
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::InvalidInput) << err.one_line();
    return err.one_line();
  } catch (const std::exception& other) {
    ADD_FAILURE() << "not an hg::Error: " << other.what();
  }
  return "";
}

}  // namespace hg::test
