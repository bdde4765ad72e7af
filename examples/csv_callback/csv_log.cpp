// csv_log — a callback written outside the mixt tree: every `every` optimizer steps it
// appends `row,step,loss,lr` to a CSV file in the run directory. Its row counter is saved
// in checkpoints, so a run resumed with trainer.resume numbers its rows on from where the
// checkpoint stood. docs/plugins.md walks through it.
#include <mixt/plugin.h>

#include <fstream>
#include <string>

namespace {

class CsvLog final : public mixt::Callback {
 public:
  CsvLog(std::int64_t every, std::string file) : every_(every), file_(std::move(file)) {}

  void on_fit_start(const mixt::FitStart& fit) override {
    if (fit.run_directory.empty()) return;  // a run that writes nothing (mixt bench, ranks other than 0)
    out_.open(fit.run_directory / file_, std::ios::app);
    if (out_.tellp() == 0) out_ << "row,step,loss,lr\n";
  }
  void on_step_end(const mixt::StepEnd& step) override {
    if (!out_.is_open() || step.state.global_step % every_ != 0) return;
    // item() waits for the device: once every `every` steps, not every step.
    out_ << ++rows_ << ',' << step.state.global_step << ',' << step.loss.item<double>() << ','
         << step.learning_rate << '\n';
  }
  // Flushed where a run can stop, so the file holds every row of a checkpointed step.
  void on_epoch_end(const mixt::EpochEnd&) override { out_.flush(); }
  void on_interrupt(const mixt::TrainState&, const std::filesystem::path&) override { out_.flush(); }
  void on_fit_end(const mixt::TrainState&) override { out_.flush(); }

  void save(torch::serialize::OutputArchive& archive) const override { archive.write("rows", c10::IValue(rows_)); }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue rows;
    archive.read("rows", rows);
    rows_ = rows.toInt();
  }

 private:
  std::int64_t every_;
  std::string file_;
  std::int64_t rows_ = 0;  // written since the run began, resumed runs included
  std::ofstream out_;
};

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("csv_log",
                         {"writes row, step, loss and learning rate every N steps to a CSV in the run directory",
                          {{"every", "10", "optimizer steps between rows"},
                           {"file", "steps.csv", "file name in the run directory"}}},
                         [](const mixt::Config& config, const mixt::CallbackContext&) {
                           const std::int64_t every = config.integer("every", 10);
                           if (every < 1) config.fail("every", "expected 1 or more, got " + std::to_string(every));
                           return std::make_unique<CsvLog>(every, config.string("file", "steps.csv"));
                         });
}

}  // namespace

MIXT_PLUGIN("csv_log", "1.0.0", register_components)
