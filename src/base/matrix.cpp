#include "dcalign/matrix.hpp"

#include <limits>
#include <string>

namespace dcalign::detail {

void check_shape(index_t count, index_t rows, index_t cols, const char* what) {
  if (count < 0 || rows < 0 || cols < 0)
    throw InvalidInput(std::string(what) + ": negative extent (" + std::to_string(count) + ", " +
                       std::to_string(rows) + ", " + std::to_string(cols) + ")");
  // Refuse sizes whose element count overflows or exceeds what a vector can hold.
  const index_t limit = std::numeric_limits<index_t>::max() / 16;
  if (rows != 0 && cols > limit / rows)
    throw InvalidInput(std::string(what) + ": " + std::to_string(rows) + " x " +
                       std::to_string(cols) + " is too large");
  if (count != 0 && rows * cols > limit / count)
    throw InvalidInput(std::string(what) + ": " + std::to_string(count) + " x " +
                       std::to_string(rows) + " x " + std::to_string(cols) + " is too large");
}

}  // namespace dcalign::detail
