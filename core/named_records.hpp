// The two lookups every registry of records (devices, comm backends) needs: by its enum, which
// past the command line is how a record is named, and by the name a user typed.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_names.hpp"
#include "core/errors.hpp"

namespace dlscale {

// The record whose `key` member equals `key`; the registry holds one for every enumerator.
template <typename Record, typename Key>
const Record& record_with(std::span<const Record> records, Key Record::*member, Key key) {
  return *std::find_if(records.begin(), records.end(),
                       [&](const Record& record) { return record.*member == key; });
}

// The record named `name`, or a UserError "OPTION: unknown WHAT 'NAME' (available: ...)".
template <typename Record>
const Record& record_named(std::span<const Record> records, const std::string& name,
                           std::string_view option, std::string_view what) {
  std::vector<std::string> names;
  for (const Record& record : records) names.push_back(record.name);
  require_choice(option, what, name, names);
  return *std::find_if(records.begin(), records.end(),
                       [&](const Record& record) { return record.name == name; });
}

// The value of a plain enum that `name` spells, or a UserError "OPTION: unknown WHAT 'NAME'
// (available: ...)".
template <typename Enum, std::size_t count>
Enum enum_named(const EnumNames<Enum, count>& names, const std::string& name,
                std::string_view option, std::string_view what) {
  require_choice(option, what, name, names.all());
  return *names.named(name);
}

}  // namespace dlscale
