// Child processes for the distributed tests: started with extra environment variables in
// their own process group, output to a file, waited for with a deadline, and always
// killed (the whole group: torchrun's workers too) when the test lets go of them.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mixt::testing {

// A TCP port on 127.0.0.1 that is free now, chosen below the kernel's ephemeral range
// (ip_local_port_range): a port the kernel hands out could be taken as the source port of
// any client connection (another test's rendezvous) between this check and the server's
// bind, which made torchrun fail with EADDRINUSE. Random start, so parallel tests differ.
inline int free_port() {
  int ephemeral_low = 32768;
  if (std::FILE* range = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(range, "%d", &ephemeral_low) != 1) ephemeral_low = 32768;
    std::fclose(range);
  }
  const int low = 10000;
  const int span = std::max(ephemeral_low - low, 1000);
  std::random_device entropy;
  const int start = static_cast<int>(entropy() % static_cast<unsigned>(span));
  for (int i = 0; i < span; ++i) {
    const int port = low + (start + i) % span;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    if (bound) return port;
  }
  throw std::runtime_error("free_port: no port free on 127.0.0.1 below the ephemeral range");
}

// What torchrun would set for `rank` of `world` on one node, rendezvous on 127.0.0.1:`port`.
inline std::vector<std::string> rank_environment(int rank, int world, int port) {
  return {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world), "LOCAL_RANK=" + std::to_string(rank),
          "LOCAL_WORLD_SIZE=" + std::to_string(world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
}

class ChildProcess {
 public:
  // `environment`: "NAME=value" entries added to (or replacing in) this process's.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
               const std::filesystem::path& directory, const std::filesystem::path& log) {
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      // mixt keeps a signal ignored at its start ignored; ctest run as a background job
      // passes SIGINT ignored down to here, and the tests that interrupt ranks need it.
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      if (::chdir(directory.c_str()) != 0) ::_exit(126);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) ::_exit(126);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
      for (const std::string& entry : environment) {
        const auto eq = entry.find('=');
        ::setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
      }
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also from the parent: no race with the first kill
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (!exit_code_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    } else {
      ::kill(-pid_, SIGKILL);  // leftovers of its group, if any
    }
  }

  pid_t pid() const { return pid_; }

  // The exit code (128 + signal when killed), or nothing if still running after `seconds`.
  std::optional<int> wait_for(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!exit_code_) {
      int status = 0;
      const pid_t got = ::waitpid(pid_, &status, WNOHANG);
      if (got == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return exit_code_;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

}  // namespace mixt::testing
