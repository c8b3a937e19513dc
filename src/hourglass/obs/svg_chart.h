// Line and marker charts as inline SVG, drawn by hand (no charting library), for the run report
// (report_html.h). A chart is an <svg class="chart" data-chart="ID" data-points="N"> element
// whose drawn data (a <path> per line, a <circle> per marker) carries class "data" and
// data-n="points it draws", so a browser test can check that every chart drew all its points.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hg::obs {

enum class SeriesStyle {
  Line,     // a solid polyline (a single point becomes a marker)
  Dashed,   // a dashed polyline: projections, limits
  Markers,  // a circle per point
};

struct ChartSeries {
  std::string name;   // the legend's text (escaped when drawn)
  std::string color;  // a CSS color, from the report's own palette (never from a file)
  SeriesStyle style = SeriesStyle::Line;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are dropped
};

struct ChartSpec {
  std::string id;  // data-chart: a short name of our own ("loss", "budget")
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  bool y_from_zero = false;  // the y axis starts at 0 (utilisation, memory, budget)
};

// The finite points of every series together.
size_t chart_points(const ChartSpec& spec);
// The chart as one <svg> element (800 x 300 user units, scaled to the page's width): axes with
// ticks at round numbers, a line or markers per series and a legend. The caller draws a chart
// only when chart_points() > 0.
std::string render_svg_chart(const ChartSpec& spec);
// `text` with &, <, >, " and ' replaced by entities: safe in HTML text and attribute values.
std::string html_escape(const std::string& text);

}  // namespace hg::obs
