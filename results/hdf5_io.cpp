// HDF5 C API calls for typed attributes and datasets; every call is checked.
#include "results/hdf5_io.hpp"

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/printable_text.hpp"

namespace dlscale::results::hdf5 {

namespace {

Hdf5Handle string_type() {
  Hdf5Handle type(DLSCALE_H5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  DLSCALE_H5_CHECK(H5Tset_size(type, H5T_VARIABLE));
  DLSCALE_H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  return type;
}

Hdf5Handle scalar_space() { return {DLSCALE_H5_CHECK(H5Screate(H5S_SCALAR)), H5Sclose}; }

Hdf5Handle simple_space(const std::vector<hsize_t>& shape) {
  return {DLSCALE_H5_CHECK(H5Screate_simple(int(shape.size()), shape.data(), nullptr)), H5Sclose};
}

std::vector<const char*> c_strings(const std::vector<std::string>& values) {
  std::vector<const char*> pointers;
  for (const auto& value : values) pointers.push_back(value.c_str());
  return pointers;
}

// Reads `count` variable-length strings through `read` (H5Aread or H5Dread) and frees HDF5's copy.
template <typename Read>
std::vector<std::string> read_strings(hid_t space, std::size_t count, Read read) {
  if (count == 0) return {};  // an empty list: nothing for HDF5 to read or free
  const Hdf5Handle type = string_type();
  std::vector<char*> pointers(count, nullptr);
  read(type.get(), pointers.data());
  std::vector<std::string> values;
  // Text from a file is printed as names and in messages: never with terminal controls in it.
  for (char* pointer : pointers) values.push_back(printable(pointer != nullptr ? pointer : ""));
  DLSCALE_H5_CHECK(H5Dvlen_reclaim(type, space, H5P_DEFAULT, pointers.data()));
  return values;
}

std::size_t element_count(hid_t space) {
  return std::size_t(DLSCALE_H5_CHECK(H5Sget_simple_extent_npoints(space)));
}

// HDF5 zeroes a 1 MiB conversion buffer for every H5Dwrite and H5Dread by default: most of the
// time that a results file of small datasets takes to write or read. A buffer of 64 KiB still
// moves large datasets in few strips.
Hdf5Handle small_transfer() {
  Hdf5Handle transfer(DLSCALE_H5_CHECK(H5Pcreate(H5P_DATASET_XFER)), H5Pclose);
  DLSCALE_H5_CHECK(H5Pset_buffer(transfer, 64 << 10, nullptr, nullptr));
  return transfer;
}

Hdf5Handle write_attribute_raw(hid_t object, const char* name, hid_t type, hid_t space,
                               const void* data) {
  Hdf5Handle attribute(
      DLSCALE_H5_CHECK(H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT)), H5Aclose);
  DLSCALE_H5_CHECK(H5Awrite(attribute, type, data));
  return attribute;
}

Hdf5Handle open_attribute(hid_t object, const char* name) {
  return {DLSCALE_H5_CHECK(H5Aopen(object, name, H5P_DEFAULT)), H5Aclose};
}

template <typename T>
T read_scalar_attribute(hid_t object, const char* name, hid_t memory_type) {
  const Hdf5Handle attribute = open_attribute(object, name);
  // One number, or the read would write past `value`; a string would not convert at all.
  const Hdf5Handle type(DLSCALE_H5_CHECK(H5Aget_type(attribute)), H5Tclose);
  const H5T_class_t type_class = H5Tget_class(type);
  const Hdf5Handle space(DLSCALE_H5_CHECK(H5Aget_space(attribute)), H5Sclose);
  if ((type_class != H5T_INTEGER && type_class != H5T_FLOAT) ||
      H5Sget_simple_extent_npoints(space) != 1)
    throw UserError(
        fmt::format("damaged results file: attribute '{}' is not a single number", name));
  T value{};
  DLSCALE_H5_CHECK(H5Aread(attribute, memory_type, &value));
  return value;
}

Hdf5Handle write_numeric_dataset(hid_t parent, const char* name, hid_t file_type, hid_t memory_type,
                                 const void* data, std::size_t count,
                                 const std::vector<hsize_t>& shape) {
  hsize_t elements = 1;
  for (const hsize_t extent : shape) elements *= extent;
  // A record whose vectors disagree with its shape would be read past their end.
  if (elements != count)
    throw std::logic_error(
        fmt::format("dataset '{}' has {} values for {} places", name, count, elements));
  const Hdf5Handle space = simple_space(shape);
  Hdf5Handle dataset(DLSCALE_H5_CHECK(H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT,
                                                 H5P_DEFAULT, H5P_DEFAULT)),
                     H5Dclose);
  if (count > 0)
    DLSCALE_H5_CHECK(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, small_transfer(), data));
  return dataset;
}

template <typename T>
std::vector<T> read_numeric_dataset(hid_t parent, const char* name, hid_t memory_type) {
  const Hdf5Handle dataset = open_dataset(parent, name);
  const Hdf5Handle space(DLSCALE_H5_CHECK(H5Dget_space(dataset)), H5Sclose);
  std::vector<T> values(element_count(space));
  DLSCALE_H5_CHECK(
      H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, small_transfer(), values.data()));
  return values;
}

}  // namespace

Hdf5Handle create_group(hid_t parent, const char* name) {
  return {DLSCALE_H5_CHECK(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
          H5Gclose};
}

Hdf5Handle open_group(hid_t parent, const char* name) {
  return {DLSCALE_H5_CHECK(H5Gopen2(parent, name, H5P_DEFAULT)), H5Gclose};
}

Hdf5Handle open_dataset(hid_t parent, const char* name) {
  return {DLSCALE_H5_CHECK(H5Dopen2(parent, name, H5P_DEFAULT)), H5Dclose};
}

void write_attribute(hid_t object, const char* name, const std::string& value) {
  const char* pointer = value.c_str();
  write_attribute_raw(object, name, string_type(), scalar_space(), &pointer);
}

void write_attribute(hid_t object, const char* name, const std::vector<std::string>& values) {
  const auto pointers = c_strings(values);
  write_attribute_raw(object, name, string_type(), simple_space({values.size()}), pointers.data());
}

void write_attribute(hid_t object, const char* name, double value) {
  write_attribute_raw(object, name, H5T_IEEE_F64LE, scalar_space(), &value);
}

void write_attribute(hid_t object, const char* name, long long value) {
  write_attribute_raw(object, name, H5T_STD_I64LE, scalar_space(), &value);
}

std::string read_string_attribute(hid_t object, const char* name) {
  const auto values = read_string_list_attribute(object, name);
  return values.empty() ? std::string() : values.front();
}

std::vector<std::string> read_string_list_attribute(hid_t object, const char* name) {
  const Hdf5Handle attribute = open_attribute(object, name);
  const Hdf5Handle space(DLSCALE_H5_CHECK(H5Aget_space(attribute)), H5Sclose);
  return read_strings(space, element_count(space), [&](hid_t type, char** buffer) {
    DLSCALE_H5_CHECK(H5Aread(attribute, type, buffer));
  });
}

double read_double_attribute(hid_t object, const char* name) {
  return read_scalar_attribute<double>(object, name, H5T_NATIVE_DOUBLE);
}

long long read_integer_attribute(hid_t object, const char* name) {
  return read_scalar_attribute<long long>(object, name, H5T_NATIVE_LLONG);
}

Hdf5Handle write_dataset(hid_t parent, const char* name, std::span<const double> values,
                         const std::vector<hsize_t>& shape) {
  return write_numeric_dataset(parent, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, values.data(),
                               values.size(), shape);
}

Hdf5Handle write_dataset(hid_t parent, const char* name, std::span<const std::uint64_t> values,
                         const std::vector<hsize_t>& shape) {
  return write_numeric_dataset(parent, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, values.data(),
                               values.size(), shape);
}

Hdf5Handle write_dataset(hid_t parent, const char* name, std::span<const std::int64_t> values,
                         const std::vector<hsize_t>& shape) {
  return write_numeric_dataset(parent, name, H5T_STD_I64LE, H5T_NATIVE_INT64, values.data(),
                               values.size(), shape);
}

Hdf5Handle write_dataset(hid_t parent, const char* name, const std::vector<std::string>& values) {
  const Hdf5Handle type = string_type();
  const Hdf5Handle space = simple_space({values.size()});
  Hdf5Handle dataset(DLSCALE_H5_CHECK(H5Dcreate2(parent, name, type, space, H5P_DEFAULT,
                                                 H5P_DEFAULT, H5P_DEFAULT)),
                     H5Dclose);
  const auto pointers = c_strings(values);
  DLSCALE_H5_CHECK(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, small_transfer(), pointers.data()));
  return dataset;
}

std::vector<hsize_t> dataset_shape(hid_t dataset) {
  const Hdf5Handle space(DLSCALE_H5_CHECK(H5Dget_space(dataset)), H5Sclose);
  std::vector<hsize_t> shape(DLSCALE_H5_CHECK(H5Sget_simple_extent_ndims(space)));
  DLSCALE_H5_CHECK(H5Sget_simple_extent_dims(space, shape.data(), nullptr));
  return shape;
}

std::vector<double> read_double_dataset(hid_t parent, const char* name) {
  return read_numeric_dataset<double>(parent, name, H5T_NATIVE_DOUBLE);
}

std::vector<std::uint64_t> read_uint64_dataset(hid_t parent, const char* name) {
  return read_numeric_dataset<std::uint64_t>(parent, name, H5T_NATIVE_UINT64);
}

std::vector<std::int64_t> read_int64_dataset(hid_t parent, const char* name) {
  return read_numeric_dataset<std::int64_t>(parent, name, H5T_NATIVE_INT64);
}

bool has_child(hid_t parent, const char* name) { return H5Lexists(parent, name, H5P_DEFAULT) > 0; }

bool is_group(hid_t parent, const char* name) {
  if (!has_child(parent, name)) return false;
  const Hdf5Handle object(DLSCALE_H5_CHECK(H5Oopen(parent, name, H5P_DEFAULT)), H5Oclose);
  return H5Iget_type(object) == H5I_GROUP;
}

std::vector<std::string> child_names(hid_t group) {
  std::vector<std::string> names;
  DLSCALE_H5_CHECK(H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* collected) -> herr_t {
        static_cast<std::vector<std::string>*>(collected)->emplace_back(name);
        return 0;
      },
      &names));
  return names;
}

bool has_attribute(hid_t object, const char* name) {
  return DLSCALE_H5_CHECK(H5Aexists(object, name)) > 0;
}

std::vector<std::string> read_string_dataset(hid_t parent, const char* name) {
  const Hdf5Handle dataset = open_dataset(parent, name);
  const Hdf5Handle space(DLSCALE_H5_CHECK(H5Dget_space(dataset)), H5Sclose);
  return read_strings(space, element_count(space), [&](hid_t type, char** buffer) {
    DLSCALE_H5_CHECK(H5Dread(dataset, type, H5S_ALL, H5S_ALL, small_transfer(), buffer));
  });
}

}  // namespace dlscale::results::hdf5
