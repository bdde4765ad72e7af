// Stop signals during start-up (see startup_signals.cpp).
#pragma once

namespace mixt::cli {

// Called first in main: true when a stop signal arrived while the libraries started (main
// then exits with 130 having done nothing); else the signals are unblocked, to be handled
// by the command's own handlers or their default action.
bool end_of_startup();

}  // namespace mixt::cli
