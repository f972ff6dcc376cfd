// The names of measurement shapes and headlines, as a results file stores them: one table each,
// read in both directions, so the writer and the reader cannot disagree.
#include "results/measurement.hpp"

#include <array>
#include <stdexcept>
#include <utility>

namespace dlscale::results {

namespace {

constexpr std::array<std::pair<MeasurementShape, const char*>, 3> shape_names = {{
    {MeasurementShape::per_rank, "per_rank"},
    {MeasurementShape::per_iteration, "per_iteration"},
    {MeasurementShape::time_series, "time_series"},
}};

constexpr std::array<std::pair<Headline, const char*>, 5> headline_names = {{
    {Headline::none, "none"},
    {Headline::mean, "mean"},
    {Headline::peak, "peak"},
    {Headline::mean_and_peak, "mean_and_peak"},
    {Headline::energy, "energy"},
}};

template <typename Enum, std::size_t count>
const char* name_of(const std::array<std::pair<Enum, const char*>, count>& names, Enum value,
                    const char* what) {
  for (const auto& [entry, name] : names)
    if (entry == value) return name;
  throw std::invalid_argument(std::string("unknown measurement ") + what + " " +
                              std::to_string(int(value)));
}

template <typename Enum, std::size_t count>
Enum value_of(const std::array<std::pair<Enum, const char*>, count>& names, const std::string& name,
              const char* what) {
  for (const auto& [entry, entry_name] : names)
    if (name == entry_name) return entry;
  throw std::invalid_argument(std::string("unknown measurement ") + what + " '" + name + "'");
}

}  // namespace

const char* shape_name(MeasurementShape shape) { return name_of(shape_names, shape, "shape"); }

const char* headline_name(Headline headline) {
  return name_of(headline_names, headline, "headline");
}

MeasurementShape shape_from_name(const std::string& name) {
  return value_of(shape_names, name, "shape");
}

Headline headline_from_name(const std::string& name) {
  return value_of(headline_names, name, "headline");
}

}  // namespace dlscale::results
