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
// libgloo.so is not linked (tests/unit/distributed_test.cpp checks the binary).
//
// Everything else in mixt sees the result as a c10d::Backend.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "distributed/backends.h"
#include "mixt/error.h"

namespace mixt::distributed {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const GlooDevice& device) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  try {
    if (!device.interface.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(device.interface));
    } else if (!device.hostname.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(device.hostname));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
  } catch (const c10::Error& error) {
    throw runtime_error("Gloo cannot create its network device (" +
                            (device.interface.empty() ? "address '" + device.hostname + "'"
                                                      : "interface '" + device.interface + "'") +
                            "): " + error.what_without_backtrace(),
                        "set GLOO_SOCKET_IFNAME to this machine's network interface (e.g. eth0)");
  }
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

}  // namespace mixt::distributed
