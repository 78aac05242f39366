#include "train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "serialize/atomic_file.h"

namespace lathe::train {

namespace {

// Geometry of the image, in SVG user units (pixels).
constexpr double kWidth = 860, kHeight = 520;
constexpr double kLeft = 78, kRight = 28, kTop = 58, kBottom = 66;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr const char* kTrainColor = "#1f77b4";
constexpr const char* kValColor = "#e8710a";
// More points than this make the file large without showing more: raw train loss is averaged
// over buckets of consecutive steps beyond it.
constexpr size_t kMaxRawPoints = 2000;

struct Axis {
  double lo, hi, step;  // range shown, spacing of ticks
  double ticks_from() const { return std::ceil(lo / step - 1e-9) * step; }
};

// Tick spacing of 1, 2 or 5 times a power of ten giving about `target` intervals over [lo, hi].
double nice_step(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

Axis make_axis(double lo, double hi, int target, bool snap_to_ticks) {
  if (!(hi > lo)) {  // one value (or none): open a small range around it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  Axis a{lo, hi, nice_step(hi - lo, target)};
  if (snap_to_ticks) {
    a.lo = std::floor(lo / a.step + 1e-9) * a.step;
    a.hi = std::ceil(hi / a.step - 1e-9) * a.step;
  }
  return a;
}

std::string fmt(double v, int decimals) {
  if (std::abs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0;  // never print "-0"
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

int decimals_for(double step) { return std::max(0, int(std::ceil(-std::log10(step) - 1e-9))); }

std::string step_label(double v) {
  const double r = std::round(v);
  if (std::abs(r) >= 10000 && std::fmod(r, 1000) == 0) return fmt(r / 1000, 0) + "k";
  return fmt(r, 0);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

using Points = std::vector<std::pair<double, double>>;

Points finite_points(const std::vector<std::pair<int64_t, double>>& in) {
  Points out;
  for (const auto& [s, v] : in)
    if (std::isfinite(v)) out.emplace_back(double(s), v);
  return out;
}

Points bucket_means(const Points& p, size_t max_points) {
  if (p.size() <= max_points) return p;
  const size_t per = (p.size() + max_points - 1) / max_points;
  Points out;
  for (size_t i = 0; i < p.size(); i += per) {
    const size_t end = std::min(p.size(), i + per);
    double sx = 0, sy = 0;
    for (size_t j = i; j < end; ++j) {
      sx += p[j].first;
      sy += p[j].second;
    }
    out.emplace_back(sx / double(end - i), sy / double(end - i));
  }
  return out;
}

// Exponential moving average with bias correction (as TensorBoard smooths), so the first points
// are not pulled towards zero. The window grows with the run: about 2% of the points.
Points smoothed(const Points& p) {
  Points out;
  if (p.empty()) return out;
  const double window = std::max(5.0, double(p.size()) / 50.0);
  const double beta = 1.0 - 1.0 / window;
  double avg = 0, weight = 0;
  for (const auto& [x, y] : p) {
    avg = beta * avg + (1 - beta) * y;
    weight = beta * weight + (1 - beta);
    out.emplace_back(x, avg / weight);
  }
  return out;
}

class Plot {
 public:
  Plot(Axis x, Axis y) : x_(x), y_(y) {}
  double px(double v) const { return kLeft + (v - x_.lo) / (x_.hi - x_.lo) * kPlotW; }
  double py(double v) const { return kTop + kPlotH - (v - y_.lo) / (y_.hi - y_.lo) * kPlotH; }

  std::string polyline(const Points& p, const char* color, double width, double opacity) const {
    if (p.empty()) return "";
    std::ostringstream os;
    os << "  <polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width
       << "\" stroke-opacity=\"" << opacity << "\" stroke-linejoin=\"round\" points=\"";
    for (const auto& [x, y] : p) os << fmt(px(x), 1) << ',' << fmt(py(y), 1) << ' ';
    os << "\"/>\n";
    return os.str();
  }

  std::string markers(const Points& p, const char* color) const {
    std::ostringstream os;
    for (const auto& [x, y] : p)
      os << "  <circle cx=\"" << fmt(px(x), 1) << "\" cy=\"" << fmt(py(y), 1) << "\" r=\"3.5\" fill=\"white\" stroke=\""
         << color << "\" stroke-width=\"2\"/>\n";
    return os.str();
  }

 private:
  Axis x_, y_;
};

}  // namespace

std::string loss_curves_svg(const LossCurves& curves) {
  const Points train = finite_points(curves.train);
  const Points val = finite_points(curves.val);
  const Points raw = bucket_means(train, kMaxRawPoints);
  const Points smooth = smoothed(train);

  double xmax = 1, ylo = INFINITY, yhi = -INFINITY;
  for (const Points* p : {&train, &val})
    for (const auto& [x, y] : *p) {
      xmax = std::max(xmax, x);
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
    }
  if (!std::isfinite(ylo)) ylo = 0, yhi = 1;
  const Axis xa = make_axis(0, xmax, 8, false);
  const Axis ya = make_axis(ylo, yhi, 6, true);
  const Plot plot(xa, ya);

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
     << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  os << "  <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "  <text x=\"" << kLeft << "\" y=\"32\" font-size=\"18\" font-weight=\"bold\" fill=\"#222\">"
     << xml_escape(curves.title.empty() ? "training loss" : curves.title) << "</text>\n";
  os << "  <rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotW << "\" height=\"" << kPlotH
     << "\" fill=\"#fafbfc\" stroke=\"#b8bec6\"/>\n";

  // Grid and tick labels.
  const int ydec = decimals_for(ya.step);
  for (double v = ya.ticks_from(); v <= ya.hi + ya.step * 1e-6; v += ya.step) {
    const double y = plot.py(v);
    os << "  <line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\"" << fmt(y, 1) << "\" y2=\"" << fmt(y, 1)
       << "\" stroke=\"#e3e6ea\"/>\n";
    os << "  <text x=\"" << kLeft - 8 << "\" y=\"" << fmt(y + 4, 1) << "\" font-size=\"12\" fill=\"#444\" text-anchor=\"end\">"
       << fmt(v, ydec) << "</text>\n";
  }
  for (double v = xa.ticks_from(); v <= xa.hi + xa.step * 1e-6; v += xa.step) {
    const double x = plot.px(v);
    os << "  <line x1=\"" << fmt(x, 1) << "\" x2=\"" << fmt(x, 1) << "\" y1=\"" << kTop << "\" y2=\"" << kTop + kPlotH
       << "\" stroke=\"#e3e6ea\"/>\n";
    os << "  <line x1=\"" << fmt(x, 1) << "\" x2=\"" << fmt(x, 1) << "\" y1=\"" << kTop + kPlotH << "\" y2=\""
       << kTop + kPlotH + 5 << "\" stroke=\"#888\"/>\n";
    os << "  <text x=\"" << fmt(x, 1) << "\" y=\"" << kTop + kPlotH + 20 << "\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">"
       << step_label(v) << "</text>\n";
  }
  os << "  <text x=\"" << kLeft + kPlotW / 2 << "\" y=\"" << kHeight - 18
     << "\" font-size=\"14\" fill=\"#222\" text-anchor=\"middle\">step</text>\n";
  os << "  <text transform=\"translate(22 " << kTop + kPlotH / 2
     << ") rotate(-90)\" font-size=\"14\" fill=\"#222\" text-anchor=\"middle\">loss (nats per byte)</text>\n";

  // Curves, clipped to the plot area.
  os << "  <clipPath id=\"plot\"><rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotW
     << "\" height=\"" << kPlotH << "\"/></clipPath>\n";
  os << "  <g clip-path=\"url(#plot)\">\n";
  os << plot.polyline(raw, kTrainColor, 1, 0.28);
  os << plot.polyline(smooth, kTrainColor, 2.2, 1);
  os << plot.polyline(val, kValColor, 2.2, 1);
  os << "  </g>\n";
  os << plot.markers(val, kValColor);  // outside the clip: the last one sits on the right edge
  if (train.empty() && val.empty())
    os << "  <text x=\"" << kLeft + kPlotW / 2 << "\" y=\"" << kTop + kPlotH / 2
       << "\" font-size=\"14\" fill=\"#888\" text-anchor=\"middle\">no data yet</text>\n";

  // Legend, top right inside the plot, with the last values so the image answers "how low?".
  struct Entry {
    std::string label;
    const char* color;
    double width, opacity;
    bool marker;
  };
  std::vector<Entry> entries;
  if (!train.empty()) {
    entries.push_back({"train (raw)", kTrainColor, 1.5, 0.35, false});
    entries.push_back({"train (smoothed, last " + fmt(smooth.back().second, 3) + ")", kTrainColor, 2.2, 1, false});
  }
  if (!val.empty()) {
    double best = val.front().second;
    for (const auto& p : val) best = std::min(best, p.second);
    entries.push_back({"validation (last " + fmt(val.back().second, 3) + ", best " + fmt(best, 3) + ")", kValColor, 2.2, 1, true});
  }
  if (!entries.empty()) {
    size_t longest = 0;
    for (const Entry& e : entries) longest = std::max(longest, e.label.size());
    const double w = 52 + 6.9 * double(longest), h = 12 + 20 * double(entries.size());
    const double x0 = kLeft + kPlotW - w - 12, y0 = kTop + 12;
    os << "  <rect x=\"" << fmt(x0, 1) << "\" y=\"" << y0 << "\" width=\"" << fmt(w, 1) << "\" height=\"" << h
       << "\" rx=\"4\" fill=\"white\" fill-opacity=\"0.92\" stroke=\"#c8cdd3\"/>\n";
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      const double y = y0 + 16 + 20 * double(i);
      os << "  <line x1=\"" << fmt(x0 + 10, 1) << "\" x2=\"" << fmt(x0 + 38, 1) << "\" y1=\"" << y << "\" y2=\"" << y
         << "\" stroke=\"" << e.color << "\" stroke-width=\"" << e.width << "\" stroke-opacity=\"" << e.opacity << "\"/>\n";
      if (e.marker)
        os << "  <circle cx=\"" << fmt(x0 + 24, 1) << "\" cy=\"" << y << "\" r=\"3.5\" fill=\"white\" stroke=\"" << e.color
           << "\" stroke-width=\"2\"/>\n";
      os << "  <text x=\"" << fmt(x0 + 46, 1) << "\" y=\"" << y + 4 << "\" font-size=\"12\" fill=\"#222\">"
         << xml_escape(e.label) << "</text>\n";
    }
  }
  os << "</svg>\n";
  return os.str();
}

void write_loss_svg(const std::string& path, const LossCurves& curves) {
  const std::string svg = loss_curves_svg(curves);
  serialize::write_file_atomically(path, [&](serialize::AtomicFile& f) { f.write(svg.data(), svg.size()); });
}

}  // namespace lathe::train
