// Each op's fields, and each batch entry's, as protocol/ops/ops.json declares
// them (generated: op_spec.inc). The daemon refuses a request that carries a
// field its op does not have (PROTOCOL.md, "Payload"): a client newer than its daemon
// learns that the daemon does not know the field, instead of the field being
// dropped without a word. `ping` with describe: true answers these lists.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "fenceq_protocol/ops.hpp"

namespace fenceq::protocol {

struct FieldList {
  const std::string_view* data = nullptr;
  std::size_t size = 0;
  constexpr const std::string_view* begin() const { return data; }
  constexpr const std::string_view* end() const { return data + size; }
  constexpr bool contains(std::string_view name) const {
    for (std::size_t i = 0; i < size; ++i) {
      if (data[i] == name) return true;
    }
    return false;
  }
};

// A field whose value is an entry (a map) or an array of entries, and the
// fields each entry may have.
struct NestedField {
  std::string_view name;
  FieldList entries;
  bool array = false;  // an array of entries; else one entry
};

struct OpSpec {
  Op op;
  FieldList fields;                 // the op's own, the envelope's not included
  std::array<NestedField, 2> nested;  // those of its fields that hold entries
};

#include "fenceq_protocol/op_spec.inc"

static_assert(one_row_per_op(kOpSpecs), "kOpSpecs needs one row per Op, in the enum's order");

constexpr const OpSpec& op_spec(Op op) { return kOpSpecs[static_cast<std::size_t>(op)]; }

}  // namespace fenceq::protocol
