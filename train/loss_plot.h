// The loss curves of a training run as a stand-alone SVG image (DIR/loss.svg): train loss (raw and
// smoothed) and validation loss against the step, with axes, ticks, grid, labels and a legend.
// Hand-written SVG keeps the program free of plotting dependencies; any browser shows it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lathe::train {

struct LossCurves {
  std::string title;                              // e.g. "tiny on fortunes"
  std::vector<std::pair<int64_t, double>> train;  // (step, loss) for every step
  std::vector<std::pair<int64_t, double>> val;    // (step, val_loss) at evaluations
};

// Non-finite losses are left out; empty curves still give a valid image with the axes.
std::string loss_curves_svg(const LossCurves& curves);
// Writes the SVG atomically (a viewer never sees half a file).
void write_loss_svg(const std::string& path, const LossCurves& curves);

}  // namespace lathe::train
