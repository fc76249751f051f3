// TextTable: columns as wide as their widest cell, numbers right-aligned.
#include <gtest/gtest.h>

#include "support/text_table.h"

namespace kiln {
namespace {

TEST(TextTable, ALongCellWidensItsColumnForEveryRow) {
  TextTable t({"KEY", "NAME", "BYTES"},
              {TextTable::Align::Left, TextTable::Align::Left, TextTable::Align::Right});
  t.addRow({"ab12", "model.layers.0.input_layernorm.eps", "1813"});
  t.addRow({"cd34", "rope", "35150"});
  EXPECT_EQ(t.toString(), "KEY   NAME                                BYTES\n"
                          "ab12  model.layers.0.input_layernorm.eps   1813\n"
                          "cd34  rope                                35150\n");
}

TEST(TextTable, WidthCountsCodePointsNotBytes) {
  EXPECT_EQ(displayWidth("h\xC3\xA9llo"), 5u); // é is two bytes, one column
  TextTable t({"A", "B"});
  t.addRow({"\xC3\xA9", "x"});
  EXPECT_EQ(t.toString(), "A  B\n\xC3\xA9  x\n");
}

} // namespace
} // namespace kiln
