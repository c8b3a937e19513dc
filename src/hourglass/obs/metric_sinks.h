// Where a run's metric records go. A record is the global optimizer step it belongs to and
// name/value pairs; a sink writes it in one format:
//   JsonlSink        one JSON object per line (metrics_jsonl.h)
//   CsvSink          a header and one row per record, columns fixed per file (metrics_csv.h)
//   TensorBoardSink  scalars "<prefix><name>" at the step in an event file (tensorboard.h)
// MetricSinks hands each record to every sink it holds. The trainer keeps two: one for the
// per-step records, one for the per-epoch ones.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/obs/metrics_csv.h"
#include "hourglass/obs/metrics_jsonl.h"
#include "hourglass/obs/tensorboard.h"

namespace hg::obs {

using MetricValues = std::vector<std::pair<std::string, double>>;

class MetricSink {
 public:
  virtual ~MetricSink() = default;
  // Writes one record of global step `step` (the values carry it too where the format wants
  // it as a field). Throws Runtime naming the file on a write failure.
  virtual void write(int64_t step, const MetricValues& values) = 0;
};

class JsonlSink final : public MetricSink {
 public:
  explicit JsonlSink(const std::string& path) : file_(path) {}
  void write(int64_t, const MetricValues& values) override { file_.write(values); }

 private:
  MetricsJsonl file_;
};

class CsvSink final : public MetricSink {
 public:
  explicit CsvSink(const std::string& path) : file_(path) {}
  void write(int64_t, const MetricValues& values) override { file_.write(values); }

 private:
  MetricsCsv file_;
};

// Writes each value but those named in `skip` (the step itself, the x axis) as the scalar
// "<prefix><name>". Several sinks may share one writer (one event file per run session).
class TensorBoardSink final : public MetricSink {
 public:
  TensorBoardSink(std::shared_ptr<TensorBoardWriter> writer, std::string prefix,
                  std::set<std::string> skip = {"step"})
      : writer_(std::move(writer)), prefix_(std::move(prefix)), skip_(std::move(skip)) {}
  void write(int64_t step, const MetricValues& values) override;

 private:
  std::shared_ptr<TensorBoardWriter> writer_;
  std::string prefix_;
  std::set<std::string> skip_;
};

class MetricSinks final : public MetricSink {
 public:
  void add(std::unique_ptr<MetricSink> sink) { sinks_.push_back(std::move(sink)); }
  bool empty() const { return sinks_.empty(); }
  void write(int64_t step, const MetricValues& values) override {
    for (const auto& sink : sinks_) sink->write(step, values);
  }

 private:
  std::vector<std::unique_ptr<MetricSink>> sinks_;
};

}  // namespace hg::obs
