// The one mixt file that includes Gloo headers.
//
// c10d::ProcessGroupGloo is compiled into the wheel's libtorch_cpu.so, together with a
// static copy of Gloo; the wheel ships no Gloo headers, and ProcessGroupGloo.hpp includes
// <gloo/...>. This file is compiled against Debian's libgloo-dev headers (a SYSTEM include
// directory set on this file only) solely for their declarations. It touches Gloo only
// through std::shared_ptr<gloo::transport::Device> — returned by createDeviceForHostname,
// stored in Options::devices — so no Gloo class layout, inline function or vtable from the
// Debian headers is ever used: every Gloo object is created, used and destroyed by the
// Gloo inside libtorch_cpu. The ProcessGroupGloo members it allocates are standard
// containers and smart pointers, whose layout does not depend on Gloo's version.
// libgloo.so is not linked (tests/distributed/distributed_test.cpp checks the binary).
//
// Everything else in mixt sees the result as a c10d::Backend.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <string>

#include "distributed/backends.h"
#include "mixt/error.h"

namespace mixt::distributed {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const GlooDevice& device) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  try {
    if (!device.interface.empty()) {
      // A comma-separated list, one device per interface, as torch.distributed reads it.
      std::size_t begin = 0;
      while (begin <= device.interface.size()) {
        const std::size_t end = std::min(device.interface.find(',', begin), device.interface.size());
        options->devices.push_back(
            c10d::ProcessGroupGloo::createDeviceForInterface(device.interface.substr(begin, end - begin)));
        begin = end + 1;
      }
    } else if (!device.hostname.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(device.hostname));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
  } catch (const std::exception& error) {  // c10::Error, or Gloo's own EnforceNotMet (an unknown interface)
    const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
    const std::string what = c10_error ? c10_error->what_without_backtrace() : error.what();
    throw runtime_error("Gloo cannot create its network device (" +
                            (device.interface.empty() ? "address '" + device.hostname + "'"
                                                      : "GLOO_SOCKET_IFNAME='" + device.interface + "'") +
                            "): " + what.substr(0, what.find('\n')),
                        "set GLOO_SOCKET_IFNAME to this machine's network interface (e.g. eth0; `ip -brief "
                        "address` lists them), or to several separated by commas");
  }
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

}  // namespace mixt::distributed
