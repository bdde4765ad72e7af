// csv_log — a callback written outside the mixt tree: every `every` optimizer steps it
// appends `row,step,loss,lr` to a CSV file in the run directory. Its row counter is saved
// in checkpoints, so a run resumed with trainer.resume numbers its rows on from where the
// checkpoint stood. docs/plugins.md walks through it.
#include <mixt/callback.h>
#include <mixt/options.h>
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

// The recipe's options, each declared once: the field's initialiser is the default, and
// `mixt describe` lists the same declarations. The factory gets them read and checked.
struct CsvLogOptions {
  std::int64_t every = 10;
  std::string file = "steps.csv";
};

const auto kOptions = mixt::OptionsOf<CsvLogOptions>()
                          .add(&CsvLogOptions::every, "every", "optimizer steps between rows", mixt::at_least(1))
                          .add(&CsvLogOptions::file, "file", "file name in the run directory");

void register_components(mixt::Registrar& registrar) {
  registrar.add_callback("csv_log",
                         "writes row, step, loss and learning rate every N steps to a CSV in the run directory",
                         kOptions, [](const CsvLogOptions& o, const mixt::CallbackContext&) {
                           return std::make_unique<CsvLog>(o.every, o.file);
                         });
}

}  // namespace

MIXT_PLUGIN("csv_log", "1.0.0", register_components)
