// SPDX-License-Identifier: Apache-2.0
// tests/support/child_process.hpp: a forked child that reports to its parent
// through a pipe, for the tests that kill processes or share a store between
// them. Fork before the test opens a store whose client runs threads of its
// own (ZooKeeper, libcurl's resolver): a child forked from a process with
// threads may find a lock one of them held (malloc's) held forever. A child
// that must act after the parent's set-up waits for a byte on a pipe.
//
//   coord::test::child_process child([](int out) {
//       std::uint64_t v = 42;
//       return ::write(out, &v, sizeof v) == sizeof v ? 0 : 1;   // exit code
//   });
//   std::uint64_t got;
//   child.read(got);
//   child.kill(SIGKILL);
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace coord::test {

class child_process {
public:
    /// Forks; the child runs body(write_fd) and exits with its result (99
    /// when it throws).
    template <class Body>
    explicit child_process(Body&& body) {
        int fds[2];
        if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
        pid_ = ::fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {
            // The child never returns into the test framework, not even by an exception.
            ::close(fds[0]);
            int code = 99;
            try {
                code = std::forward<Body>(body)(fds[1]);
            } catch (...) {
            }
            ::_exit(code);
        }
        ::close(fds[1]);
        fd_ = fds[0];
    }
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;
    /// A child still running is killed; the pipe is closed.
    ~child_process() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (fd_ >= 0) ::close(fd_);
    }

    /// Reads one T the child wrote; false at end of stream (the child is gone).
    template <class T>
    bool read(T& v) {
        return ::read(fd_, &v, sizeof v) == static_cast<ssize_t>(sizeof v);
    }
    void kill(int sig) { ::kill(pid_, sig); }
    /// Waits for the child; returns its waitpid status.
    int wait() {
        int status = 0;
        ::waitpid(pid_, &status, 0);
        reaped_ = true;
        return status;
    }
    pid_t pid() const noexcept { return pid_; }

private:
    pid_t pid_ = -1;
    int fd_ = -1;
    bool reaped_ = false;
};

}  // namespace coord::test
