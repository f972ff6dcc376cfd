// Typed reads and writes of HDF5 attributes and datasets, shared by the results writer and reader.
// Strings are variable-length UTF-8, which h5py returns as Python str for attributes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "results/hdf5_check.hpp"

namespace dlscale::results::hdf5 {

Hdf5Handle create_group(hid_t parent, const char* name);
Hdf5Handle open_group(hid_t parent, const char* name);
Hdf5Handle open_dataset(hid_t parent, const char* name);

void write_attribute(hid_t object, const char* name, const std::string& value);
void write_attribute(hid_t object, const char* name, const std::vector<std::string>& values);
void write_attribute(hid_t object, const char* name, double value);
void write_attribute(hid_t object, const char* name, long long value);

std::string read_string_attribute(hid_t object, const char* name);
std::vector<std::string> read_string_list_attribute(hid_t object, const char* name);
double read_double_attribute(hid_t object, const char* name);
long long read_integer_attribute(hid_t object, const char* name);

// Writes a dataset of the given shape (row-major) and returns it, for attributes to be added.
Hdf5Handle write_dataset(hid_t parent, const char* name, std::span<const double> values,
                         const std::vector<hsize_t>& shape);
Hdf5Handle write_dataset(hid_t parent, const char* name, std::span<const std::uint64_t> values,
                         const std::vector<hsize_t>& shape);
Hdf5Handle write_dataset(hid_t parent, const char* name, std::span<const std::int64_t> values,
                         const std::vector<hsize_t>& shape);
Hdf5Handle write_dataset(hid_t parent, const char* name, const std::vector<std::string>& values);

std::vector<hsize_t> dataset_shape(hid_t dataset);
std::vector<double> read_double_dataset(hid_t parent, const char* name);
std::vector<std::uint64_t> read_uint64_dataset(hid_t parent, const char* name);
std::vector<std::int64_t> read_int64_dataset(hid_t parent, const char* name);
std::vector<std::string> read_string_dataset(hid_t parent, const char* name);
// Whether `parent` has a group or dataset called `name`.
bool has_child(hid_t parent, const char* name);
// Whether `parent` has a group called `name`.
bool is_group(hid_t parent, const char* name);
bool has_attribute(hid_t object, const char* name);
// The names of a group's members, in alphabetical order.
std::vector<std::string> child_names(hid_t group);

}  // namespace dlscale::results::hdf5
