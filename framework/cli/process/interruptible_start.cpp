#include "process/interruptible_start.h"

#include <cstdlib>

#include "common/interrupt.h"
#include "mixt/error.h"

namespace mixt::cli {

bool launched_as_main_rank() {
  const char* rank = std::getenv("RANK");
  return !rank || std::string(rank) == "0";
}

Experiment prepare_interruptibly(Session& session, const std::string& recipe, const std::vector<std::string>& overrides,
                                 const char* acknowledgement, const std::string& what) {
  install_interrupt_handlers(launched_as_main_rank() ? acknowledgement : nullptr);
  Experiment experiment = session.prepare(recipe, overrides);
  bool stop = interrupt_requested();
  if (experiment.parallel) stop = experiment.parallel->sum({stop ? 1.0 : 0.0})[0] > 0;  // every rank alike
  if (stop) throw Error(ErrorKind::interrupted, "interrupted before " + what + "; nothing was written");
  return experiment;
}

}  // namespace mixt::cli
