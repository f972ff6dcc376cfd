// Packing is plain: lengths, then bytes or doubles, in a fixed order. Both ends are this program.
#include "coordinator/measurement_gather.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

namespace dlscale::coordinator {

namespace {

class Packer {
 public:
  void number(std::uint64_t value) { raw(&value, sizeof value); }
  void text(const std::string& value) {
    number(value.size());
    raw(value.data(), value.size());
  }
  void values(const std::vector<double>& values) {
    number(values.size());
    raw(values.data(), values.size() * sizeof(double));
  }
  std::string bytes() && { return std::move(bytes_); }

 private:
  void raw(const void* data, std::size_t size) {
    bytes_.append(static_cast<const char*>(data), size);
  }
  std::string bytes_;
};

class Unpacker {
 public:
  explicit Unpacker(const std::string& bytes) : bytes_(bytes) {}
  bool done() const { return offset_ == bytes_.size(); }
  std::uint64_t number() {
    std::uint64_t value = 0;
    raw(&value, sizeof value);
    return value;
  }
  std::string text() {
    std::string value(take(number()), '\0');
    raw(value.data(), value.size());
    return value;
  }
  std::vector<double> values() {
    std::vector<double> values(take(number() * sizeof(double)) / sizeof(double));
    raw(values.data(), values.size() * sizeof(double));
    return values;
  }

 private:
  std::size_t take(std::size_t size) const {
    if (size > bytes_.size() - offset_) throw std::logic_error("measurement packing is corrupt");
    return size;
  }
  void raw(void* data, std::size_t size) {
    // An empty vector's data() may be null, and memcpy takes no null pointer even for 0 bytes.
    if (take(size) > 0) std::memcpy(data, bytes_.data() + offset_, size);
    offset_ += size;
  }
  const std::string& bytes_;
  std::size_t offset_ = 0;
};

std::string pack(const std::vector<results::Measurement>& measurements) {
  Packer packer;
  for (const auto& m : measurements) {
    packer.text(m.name);
    packer.text(m.units);
    packer.text(m.description);
    packer.number(std::uint64_t(m.shape));
    packer.number(std::uint64_t(m.headline));
    packer.text(m.shared_by);
    packer.text(m.absent_reason);
    packer.values(m.seconds);
    packer.values(m.values);
  }
  return std::move(packer).bytes();
}

std::vector<results::Measurement> unpack(const std::string& bytes) {
  std::vector<results::Measurement> measurements;
  Unpacker unpacker(bytes);
  while (!unpacker.done()) {
    results::Measurement m;
    m.name = unpacker.text();
    m.units = unpacker.text();
    m.description = unpacker.text();
    m.shape = results::MeasurementShape(unpacker.number());
    m.headline = results::Headline(unpacker.number());
    m.shared_by = unpacker.text();
    m.absent_reason = unpacker.text();
    m.seconds = unpacker.values();
    m.values = unpacker.values();
    measurements.push_back(std::move(m));
  }
  return measurements;
}

}  // namespace

std::vector<results::MeasurementRecord> gather_measurements(
    comm::HostGroup& group, const std::vector<results::Measurement>& mine) {
  const std::vector<std::string> packed = group.gather_strings_to_root(pack(mine));
  std::vector<results::MeasurementRecord> records;
  if (group.rank() != 0) return records;
  const auto ranks = std::size_t(group.size());
  std::map<std::string, std::size_t> index_of;
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    for (auto& m : unpack(packed[rank])) {
      auto [entry, added] = index_of.try_emplace(m.name, records.size());
      if (added) {
        results::MeasurementRecord record;
        record.name = m.name;
        record.units = m.units;
        record.description = m.description;
        record.shape = m.shape;
        record.headline = m.headline;
        record.shared_by.resize(ranks);
        record.absent_reasons.assign(ranks, "not measured on this rank");
        record.values.resize(ranks);
        if (m.shape == results::MeasurementShape::time_series) record.seconds.resize(ranks);
        records.push_back(std::move(record));
      }
      auto& record = records[entry->second];
      record.shared_by[rank] = m.shared_by;
      record.absent_reasons[rank] = m.absent_reason;
      record.values[rank] = std::move(m.values);
      if (!record.seconds.empty()) record.seconds[rank] = std::move(m.seconds);
    }
  }
  return records;
}

}  // namespace dlscale::coordinator
