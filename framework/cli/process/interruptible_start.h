// How `mixt run` and `mixt lr-find` start: a Ctrl-C while the plugins load, the data is
// scanned and the model is built (minutes for an ImageNet folder without an index) stops
// before anything runs or is written, every rank agreeing.
#pragma once

#include <string>
#include <vector>

#include "experiment/session.h"

namespace mixt::cli {

// RANK unset or "0": the process that acknowledges a Ctrl-C (torchrun passes it to every
// rank, and one line is enough). Known before the coordinator is.
bool launched_as_main_rank();

// session.prepare(recipe, overrides) with the stop handlers installed first (`acknowledgement`
// printed by the main rank); an interrupted error saying "interrupted before <what>; nothing
// was written" when a stop came while it prepared.
Experiment prepare_interruptibly(Session& session, const std::string& recipe, const std::vector<std::string>& overrides,
                                 const char* acknowledgement, const std::string& what);

}  // namespace mixt::cli
