// SIGINT/SIGTERM handling: the first signal asks the trainer to stop after the current
// step (it then writes a checkpoint and exits 130); a second one exits at once.
#pragma once

namespace mixt {
void install_interrupt_handlers();
bool interrupt_requested();
void request_interrupt();        // what the signal handler does; also for tests
void clear_interrupt_request();  // for tests
}  // namespace mixt
